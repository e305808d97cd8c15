"""A provider that answers any request without a script, for testing code built on allama."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping
from typing import Any, cast

from pydantic import JsonValue

from allama.errors import InvalidRequestError
from allama.mock._events import response_events
from allama.mock._scripted import _Recorder
from allama.mock._structured import unoffered_tool
from allama.mock._values import unenforced_marks, unknown_formats, value_and_plain_formats
from allama.provider import capabilities_only
from allama.schema._inline import no_object_parameters, object_parameters
from allama.stream import AsyncChatStream, ChatStream, aiter_events
from allama.types import (
    AssistantMessage,
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    ChatValidation,
    FinishReason,
    RequestField,
    TextPart,
    ToolCall,
    ToolDefinition,
    Usage,
    Warning,
)

__all__ = ["TestProvider"]

TEXT_ANSWER = "This is a test answer."
"""What the provider says when nothing asks for structure."""

CHARS_PER_TOKEN = 4
"""The rough rule the made-up token counts follow."""

_KEPT_ANSWERS = 8
"""Answers a provider keeps by their schema (a plan and its call ask for the same one)."""


class TestProvider(_Recorder):
    """Answers every request with the least value its schema accepts, deterministically.

    A forced tool call (`tool_choice` naming a tool, or `required`: the first tool) gets one
    call whose arguments, an object, the tool's `parameters` accept (`{}` for a tool of no
    arguments); a `json_schema` response format gets that schema's value as JSON text; a
    `json` format gets `{}`; a `choice` its first option; anything else gets
    `TEXT_ANSWER`. Usage is counted at one token per four characters, so that code reading
    usage sees numbers. Structured output, choice output, tool calls, forced tool choice
    and streaming are reported as supported, a tool schema of any root as not; no
    log-probabilities are made up. What a provider refuses before sending is refused here
    (`InvalidRequestError`), by the call and its validation: a request with no messages, a
    tool whose parameters are no object schema (as Anthropic and Gemini refuse it, unless
    `TOOL_SCHEMA_ANY_ROOT` is set supported), and a tool choice naming a tool not offered.

    The request's validation and the response say in an `approximated` warning on the
    field holding the schema what the answer is not held to, so that an extraction reports
    its enforcement as `approximate`, not `exact`, where a provider's would: a mark of
    allama's for a check no provider enforces (`format: bounded-date`, `strip-whitespace`,
    `decimal` and the like, and the JSON in a string, `contentSchema`), and a string
    `format` the provider does not know (see `allama.mock._formats`), which gets plain text
    the format may refuse.

    The value is the schema's: checks a type makes beyond its JSON Schema are not known
    here. Dates count up from 2000-01-01, so `FutureDate` and `FutureDatetime` (whose
    schema is any date's, marked `future-...` for the check it cannot say) refuse them, as
    may a date, time or duration with bounds (`Field(ge=date(2020, 1, 1))`, a `timedelta`
    over a day, marked `bounded-...`); `PastDate`, `PastDatetime`, `AwareDatetime` and
    `NaiveDatetime` take its values.
    Script such a value with `MockProvider.with_structured`.

    >>> from allama.types import ResponseFormat
    >>> schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 2}},
    ...           "required": ["n"]}
    >>> request = ChatRequest("m").user("?").with_response_format(ResponseFormat.for_schema(schema))
    >>> TestProvider().chat(request).text()
    '{"n":2}'
    """

    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, name: str = "test") -> None:
        super().__init__(name)
        self._answers: dict[str, tuple[str | ValueError, list[tuple[str, str]]]] = {}
        self._cache_lock = threading.Lock()
        self.with_supported_chat_capabilities(
            (
                ChatCapability.STRUCTURED_OUTPUT,
                ChatCapability.TOOL_CALLS,
                ChatCapability.FORCED_TOOL_CHOICE,
                ChatCapability.STREAMING,
                ChatCapability.CHOICE_OUTPUT,
            )
        )
        # A tool's arguments are an object (`_parameters`): extraction wraps another root.
        self.with_chat_capability(
            ChatCapability.TOOL_SCHEMA_ANY_ROOT, CapabilitySupport.UNSUPPORTED
        )

    def _answer(self, request: ChatRequest) -> ChatResponse:
        number = self._record(request)
        self._refuse_unsendable(request)
        tool = self._forced_tool(request)
        content: TextPart | ToolCall
        if tool is not None:
            parameters = self._parameters(request, tool)
            arguments = self._value(parameters, f"the parameters of tool `{tool.name}`")
            content = ToolCall(id=f"call_test_{number}", name=tool.name, arguments=arguments)
            finish = FinishReason.TOOL_CALLS
            written = content.arguments
        else:
            content = TextPart(text=self._text(request))
            finish = FinishReason.STOP
            written = content.text
        usage = Usage(
            input_tokens=_tokens(_request_chars(request)), output_tokens=_tokens(len(written))
        )
        return ChatResponse(
            (content,),
            finish_reason=finish,
            usage=usage,
            warnings=self._degradations(request),
            model=request.model,
            provider=self.name,
            id=f"test-{number}",
        )

    def validate_chat_request(
        self, request: ChatRequest, *, stream: bool = False
    ) -> ChatValidation:
        """What the call would report; what the call refuses before answering
        (`_refuse_unsendable`) is refused here too, as a provider's dry run refuses what
        its encoding does."""
        self._refuse_unsendable(request)
        validation = capabilities_only()
        for warning in self._degradations(request):
            validation = validation.with_warning(warning)
        return validation

    def _degradations(self, request: ChatRequest) -> tuple[Warning, ...]:
        """What the answer cannot hold to, as `approximated` warnings: each mark in the
        answered schema of a check no provider enforces (reported as every provider
        reports it), and each string `format` of it that the value generator writes as
        plain text."""
        try:
            tool = self._forced_tool(request)
        except InvalidRequestError:
            return ()  # the call itself says so
        if tool is not None:
            schema: object = self._parameters(request, tool)
            field = RequestField.TOOLS
        else:
            response_format = request.response_format
            if response_format is None or response_format.options is not None:
                return ()
            schema = response_format.json_schema
            field = RequestField.RESPONSE_FORMAT
        if schema is None:
            return ()
        marked = tuple(
            Warning.approximated(
                field,
                f"{what} at `{pointer or '/'}` asks for a check no provider enforces, so the "
                "test provider does not say it holds either: its value may fail it",
            ).with_provider(self.name)
            for pointer, what in unenforced_marks(schema)
        )
        if not unknown_formats(schema):
            return marked
        # Only the formats the answer holds as plain text: not an optional field's that
        # the answer leaves out. With no answer, the call says so; the plan names them all.
        generated = self._generated(schema)
        plain = unknown_formats(schema) if isinstance(generated[0], ValueError) else generated[1]
        return marked + tuple(
            Warning.approximated(
                field,
                f"`format` `{fmt}` at `{pointer or '/'}` is not one the test provider "
                "writes: its value is a plain string, which the format may refuse",
            ).with_provider(self.name)
            for pointer, fmt in plain
        )

    def _refuse_unsendable(self, request: ChatRequest) -> None:
        """Refuse what every provider, or the strictest, refuses before sending: a request
        with no messages, a tool whose parameters are no object schema."""
        self._refuse_no_messages(request)
        for tool in request.tools:
            self._parameters(request, tool)

    def _parameters(self, request: ChatRequest, tool: ToolDefinition) -> dict[str, JsonValue]:
        """The schema a call to `tool` answers: its parameters as an object root (`{}` is
        a tool of no arguments, answered `{}`), as a provider passes the arguments; a root
        that is no object is refused, as Anthropic and Gemini refuse it, unless the
        caller says this provider takes any root (`TOOL_SCHEMA_ANY_ROOT`)."""
        parameters = object_parameters(tool.parameters)
        if parameters is not None:
            return cast("dict[str, JsonValue]", parameters)
        any_root = self.chat_capability(request.model, ChatCapability.TOOL_SCHEMA_ANY_ROOT)
        if any_root is CapabilitySupport.SUPPORTED:
            return tool.parameters
        raise self._invalid(no_object_parameters(tool.name, "the test provider"))

    def _generated(self, schema: object) -> tuple[str | ValueError, list[tuple[str, str]]]:
        """The answer to `schema` as JSON text (or why there is none), with the unknown
        formats it writes as plain text; the last few kept, as a plan and its call ask
        for the same one."""
        try:
            key = json.dumps(schema, sort_keys=True, default=repr)
        except (TypeError, ValueError, RecursionError):
            key = None
        if key is not None and key in self._answers:
            return self._answers[key]
        answer: tuple[str | ValueError, list[tuple[str, str]]]
        try:
            value, plain = value_and_plain_formats(cast("Mapping[str, Any]", schema))
            answer = (json.dumps(value, separators=(",", ":"), ensure_ascii=False), plain)
        except ValueError as error:
            answer = (error, [])
        if key is not None:
            with self._cache_lock:
                while len(self._answers) >= _KEPT_ANSWERS:
                    del self._answers[next(iter(self._answers))]
                self._answers[key] = answer
        return answer

    def _forced_tool(self, request: ChatRequest) -> ToolDefinition | None:
        unoffered = unoffered_tool(request)
        if unoffered is not None:
            raise self._invalid(unoffered)
        choice = request.tool_choice
        if choice is None or not request.tools:
            return None
        if choice.mode == "required":
            return request.tools[0]
        if choice.mode == "tool":
            return next(tool for tool in request.tools if tool.name == choice.name)
        return None

    def _text(self, request: ChatRequest) -> str:
        response_format = request.response_format
        if response_format is None or response_format.type == "text":
            return TEXT_ANSWER
        if response_format.options is not None:
            return response_format.options[0]
        if response_format.type == "json" or response_format.json_schema is None:
            return "{}"
        return self._value(response_format.json_schema, "the response format schema")

    def _value(self, schema: dict[str, JsonValue], what: str) -> str:
        text = self._generated(schema)[0]
        if isinstance(text, ValueError):
            raise self._invalid(f"{what} has no value: {text}") from None
        return text

    def chat(self, request: ChatRequest) -> ChatResponse:
        return self._answer(request)

    async def achat(self, request: ChatRequest) -> ChatResponse:
        return self._answer(request)

    def chat_stream(self, request: ChatRequest) -> ChatStream:
        """The answer as events, values arriving in pieces (an invalid request raises here)."""
        events = response_events(self._answer(request))
        return ChatStream(iter(events), provider=self.name)

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream:
        events = response_events(self._answer(request))
        return AsyncChatStream(aiter_events(events), provider=self.name)

    def __repr__(self) -> str:
        return f"TestProvider(name={self.name!r}, calls={self.call_count})"


def _tokens(chars: int) -> int:
    return max(1, math.ceil(chars / CHARS_PER_TOKEN))


def _request_chars(request: ChatRequest) -> int:
    """Characters of the conversation: message text, tool call arguments, tool results."""
    total = 0
    for message in request.messages:
        if isinstance(message, AssistantMessage):
            for block in message.content:
                if isinstance(block, ToolCall):
                    total += len(block.arguments)
                elif isinstance(block, TextPart):
                    total += len(block.text)
        else:
            total += len(message.text() or "")
    return total
