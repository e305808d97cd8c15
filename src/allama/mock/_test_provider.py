"""A provider that answers any request without a script, for testing code built on allama."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, cast

from pydantic import JsonValue

from allama.mock._enforcement import marked, schema_key
from allama.mock._events import response_events
from allama.mock._scripted import _Recorder
from allama.mock._structured import plain_options
from allama.mock._values import unknown_formats, value_and_plain_formats
from allama.schema._inline import no_object_parameters, object_parameters
from allama.stream import AsyncChatStream, ChatStream, aiter_events
from allama.types import (
    AssistantMessage,
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
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

_Answer = tuple[str | ValueError, list[tuple[str, str]]]
"""The answer to a schema as JSON text (or why there is none), with the unknown formats it
writes as plain text."""


class TestProvider(_Recorder):
    """Answers every request with the least value its schema accepts, deterministically.

    A forced tool call (`tool_choice` naming a tool, or `required`: the first tool) gets one
    call whose arguments, an object, the tool's `parameters` accept (`{}` for a tool of no
    arguments); a `json_schema` response format gets that schema's value as JSON text; a
    `json` format gets `{}`; a `choice` its first option, as does a decision sent as a
    plain prompt (the request option `allama.decision.options`); anything else gets
    `TEXT_ANSWER`. Usage is counted at one token per four characters, so that code reading
    usage sees numbers. Structured output, choice output, tool calls, forced tool choice
    and streaming are reported as supported, a tool schema of any root as not; no
    log-probabilities are made up. What a provider refuses before sending is refused here
    (`InvalidRequestError`), by the call and its validation: a request with no messages, a
    response format's schema no adapter reads (`minLength: -1`, a `$ref` to nothing), a
    tool whose parameters are no object schema (as Anthropic and Gemini refuse it, unless
    `TOOL_SCHEMA_ANY_ROOT` is set supported), a tool choice naming a tool not offered, and
    a conversation the Chat Completions adapters refuse (a tool call whose result does not
    follow right after its turn, a second result for one call), in their words.
    A capability set unsupported refuses what it would on a provider (a warning on its
    field, so an extraction's record says `not_enforced`), as does a tool choice among no
    tools.

    The request's validation and the response say in an `approximated` warning on the
    field holding the schema what the answer is not held to, so that an extraction reports
    its enforcement as `approximate`, not `exact`, where a provider's would: a mark of
    allama's for a check no provider enforces (`format: bounded-date`, `strip-whitespace`,
    `decimal` and the like, and the JSON in a string, `contentSchema`), a string `format`
    the provider does not know (see `allama.mock._formats`), which gets plain text the
    format may refuse, and whatever else no provider's dialect enforces exactly: the
    schema is rewritten in each strict dialect a provider sends it in (OpenAI's strict
    mode and its variants, Anthropic's, Gemini's two for a response format, llama.cpp's
    grammar), and where none is exact (`uniqueItems` of a `set`, `format: uri` with the
    lengths of an `HttpUrl`), neither is the test provider.

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

    _WHO = "the test provider"

    def __init__(self, name: str = "test") -> None:
        super().__init__(name)
        self._answers: dict[str, _Answer] = {}
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
        warnings = self._degradations(request)
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
            warnings=warnings,
            model=request.model,
            provider=self.name,
            id=f"test-{number}",
        )

    def _schema_warnings(self, schema: object, field: RequestField) -> tuple[Warning, ...]:
        """What the answer cannot hold to, as `approximated` warnings: each mark in the
        answered schema of a check no provider enforces (reported as every provider
        reports it), each string `format` of it that the value generator writes as plain
        text, and elsewhere what no provider's dialect enforces exactly."""
        marks, said = marked(schema, field, self.name, self._WHO)
        plain: list[tuple[str, str]] = []
        if unknown_formats(schema):
            # Only the formats the answer holds as plain text: not an optional field's that
            # the answer leaves out. With no answer, the call says so; the plan names them.
            generated = self._generated(schema)
            plain = (
                unknown_formats(schema) if isinstance(generated[0], ValueError) else generated[1]
            )
        formats = tuple(
            Warning.approximated(
                field,
                f"`format` `{fmt}` at `{pointer or '/'}` is not one the test provider "
                "writes: its value is a plain string, which the format may refuse",
            ).with_provider(self.name)
            for pointer, fmt in plain
        )
        said = [*said, *(pointer for pointer, _ in plain)]
        return marks + formats + self._beyond_dialects(schema, field, said)

    def _refuse_unsendable(self, request: ChatRequest) -> None:
        """Refuse what every provider, or the strictest, refuses before sending: a request
        with no messages, a schema no provider reads, a tool call left without its result,
        a tool whose parameters are no object schema."""
        self._refuse_unsendable_anywhere(request)
        for tool in request.tools:
            self._parameters(request, tool)

    def _tool_schema(self, request: ChatRequest, tool: ToolDefinition) -> object:
        return self._parameters(request, tool)

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

    def _generated(self, schema: object) -> _Answer:
        """The answer to `schema` as JSON text (or why there is none), with the unknown
        formats it writes as plain text; the last few kept, as a plan and its call ask
        for the same one."""
        return self._kept(self._answers, schema_key(schema), lambda: _generate(schema))

    def _text(self, request: ChatRequest) -> str:
        """The answer in text: a choice's first option (a choice format's, or a decision's
        sent as a plain prompt), the schema's value, `{}` for JSON mode, else `TEXT_ANSWER`."""
        options = plain_options(request, None)
        if options is not None:
            return options[0]
        response_format = request.response_format
        if response_format is None or response_format.type == "text":
            return TEXT_ANSWER
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


def _generate(schema: object) -> _Answer:
    try:
        value, plain = value_and_plain_formats(cast("Mapping[str, Any]", schema))
    except ValueError as error:
        return (error, [])
    return (json.dumps(value, separators=(",", ":"), ensure_ascii=False), plain)


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
