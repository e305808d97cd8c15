"""A provider that answers any request without a script, for testing code built on allama."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import JsonValue

from allama._not_a_request import not_a_request
from allama.errors import InvalidRequestError
from allama.extract._root import ROOT_KEY, object_rooted
from allama.mock._events import response_events
from allama.mock._scripted import _Recorder
from allama.mock._structured import unoffered_tool
from allama.mock._values import unenforced_marks, unknown_formats, value_and_plain_formats
from allama.provider import capabilities_only
from allama.schema._inline import no_object_parameters, object_parameters
from allama.schema._pointer import display
from allama.schema._rewrite import Rewrite
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

if TYPE_CHECKING:
    from allama.schema._dialects._openai_strict import OpenAIProfile

__all__ = ["TestProvider"]

TEXT_ANSWER = "This is a test answer."
"""What the provider says when nothing asks for structure."""

CHARS_PER_TOKEN = 4
"""The rough rule the made-up token counts follow."""

_KEPT_ANSWERS = 8
"""Answers a provider keeps by their schema (a plan and its call ask for the same one)."""

_K = TypeVar("_K")
_V = TypeVar("_V")

_Answer = tuple[str | ValueError, list[tuple[str, str]]]
"""The answer to a schema as JSON text (or why there is none), with the unknown formats it
writes as plain text."""


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

    def __init__(self, name: str = "test") -> None:
        super().__init__(name)
        self._answers: dict[str, _Answer] = {}
        self._beyond: dict[tuple[str, RequestField], tuple[Warning, ...]] = {}
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
        if not isinstance(request, ChatRequest):
            raise not_a_request(request)
        self._refuse_unsendable(request)
        validation = capabilities_only()
        for warning in self._degradations(request):
            validation = validation.with_warning(warning)
        return validation

    def _degradations(self, request: ChatRequest) -> tuple[Warning, ...]:
        """What the answer cannot hold to, as `approximated` warnings: each mark in the
        answered schema of a check no provider enforces (reported as every provider
        reports it), each string `format` of it that the value generator writes as plain
        text, and elsewhere what no provider's dialect enforces exactly."""
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
        marks = unenforced_marks(schema)
        marked = tuple(
            Warning.approximated(
                field,
                f"{what} at `{pointer or '/'}` asks for a check no provider enforces, so the "
                "test provider does not say it holds either: its value may fail it",
            ).with_provider(self.name)
            for pointer, what in marks
        )
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
        said = [pointer for pointer, _ in (*marks, *plain)]
        beyond = self._kept(
            self._beyond,
            _key(schema, field),
            lambda: self._beyond_dialects(schema, field, said),
        )
        return marked + formats + beyond

    def _beyond_dialects(
        self, schema: object, field: RequestField, said: list[str]
    ) -> tuple[Warning, ...]:
        """Where no strict dialect a provider sends the schema in rewrites it exactly
        (beyond the places said already), the places they all fall short at, each named
        with the first dialect's note on it; none where any dialect is exact."""
        if not isinstance(schema, Mapping):
            return ()
        covered = [display(pointer) for pointer in said]
        short: list[tuple[str, list[tuple[str, str]]]] = []
        for label, rewrite, object_root in _DIALECTS[field]:
            try:
                notes = _rewritten(schema, rewrite, object_root)
            except (ValueError, RecursionError):  # a schema this dialect cannot read
                continue
            left = [(at, message) for at, message in notes if not _within(at, covered)]
            if not left:
                return ()  # a provider holds the answer to it exactly
            short.append((label, left))
        if not short:
            return ()
        label, first = short[0]
        # The places of the first dialect's notes that every other one falls short at too
        # (at the place, inside it or around it: a map one refuses whole, another inside).
        common = [
            at
            for at in dict.fromkeys(at for at, _ in first)
            if all(any(_related(at, where) for where, _ in notes) for _, notes in short[1:])
        ]
        if not common:
            return (
                Warning.approximated(
                    field,
                    "no provider's dialect enforces the schema exactly, so the test provider "
                    f"does not say it holds either ({label}: {first[0][1]})",
                ).with_provider(self.name),
            )
        return tuple(
            Warning.approximated(
                field,
                f"`{at}` is enforced exactly by no provider's dialect, so the test provider "
                f"does not say it holds either ({label}: "
                f"{next(message for where, message in first if where == at)})",
            ).with_provider(self.name)
            for at in common
        )

    def _kept(self, store: dict[_K, _V], key: _K | None, make: Callable[[], _V]) -> _V:
        """`make()`, kept in `store` under `key` (the last few: a plan and its call ask for
        the same), or not kept where the schema has no key."""
        if key is not None:
            try:
                return store[key]
            except KeyError:
                pass
        made = make()
        if key is not None:
            with self._cache_lock:
                while len(store) >= _KEPT_ANSWERS:
                    del store[next(iter(store))]
                store[key] = made
        return made

    def _refuse_unsendable(self, request: ChatRequest) -> None:
        """Refuse what every provider, or the strictest, refuses before sending: a request
        with no messages, a schema no JSON holds, a tool whose parameters are no object
        schema."""
        self._refuse_unsendable_anywhere(request)
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

    def _generated(self, schema: object) -> _Answer:
        """The answer to `schema` as JSON text (or why there is none), with the unknown
        formats it writes as plain text; the last few kept, as a plan and its call ask
        for the same one."""
        return self._kept(self._answers, _key(schema), lambda: _generate(schema))

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


def _key(schema: object, *more: object) -> Any:
    """What a schema is kept by: its JSON (with `more` beside it), `None` for one that
    has none (a schema built in Python that holds itself)."""
    try:
        text = json.dumps(schema, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        return None
    return (text, *more) if more else text


def _generate(schema: object) -> _Answer:
    try:
        value, plain = value_and_plain_formats(cast("Mapping[str, Any]", schema))
    except ValueError as error:
        return (error, [])
    return (json.dumps(value, separators=(",", ":"), ensure_ascii=False), plain)


_Dialect = tuple[str, Callable[[Mapping[str, Any]], Rewrite], bool]
"""A strict dialect a provider sends a schema in: its name, its rewrite, and whether it
takes only an object root (extraction then wraps another root, which changes nothing the
schema enforces)."""


def _openai(profile: OpenAIProfile) -> Callable[[Mapping[str, Any]], Rewrite]:
    def rewrite(schema: Mapping[str, Any]) -> Rewrite:
        from allama.schema._dialects._openai_strict import openai_strict

        return openai_strict(schema, profile=profile)

    return rewrite


def _anthropic(schema: Mapping[str, Any]) -> Rewrite:
    from allama.schema._dialects._anthropic import anthropic

    return anthropic(schema)


def _gemini_json_schema(schema: Mapping[str, Any]) -> Rewrite:
    from allama.schema._dialects._gemini import gemini_json_schema

    return gemini_json_schema(schema)


def _gemini_response_schema(schema: Mapping[str, Any]) -> Rewrite:
    from allama.schema._dialects._gemini import gemini_response_schema

    return gemini_response_schema(schema)


def _llama_cpp(schema: Mapping[str, Any]) -> Rewrite:
    from allama.schema._dialects._llama_cpp import llama_cpp

    return llama_cpp(schema)


_OPENAI_DIALECTS: tuple[_Dialect, ...] = (
    ("OpenAI strict mode", _openai("current"), True),
    ("Azure OpenAI's strict mode (older API versions)", _openai("azure_legacy"), True),
    ("OpenAI strict mode (fine-tuned models)", _openai("fine_tuned"), True),
    ("xAI's strict mode", _openai("xai"), True),
    ("Anthropic strict mode", _anthropic, True),
)
_DIALECTS: dict[RequestField, tuple[_Dialect, ...]] = {
    RequestField.RESPONSE_FORMAT: (
        *_OPENAI_DIALECTS,
        ("Gemini responseJsonSchema", _gemini_json_schema, False),
        ("Gemini responseSchema", _gemini_response_schema, False),
        ("llama.cpp's grammar", _llama_cpp, False),
    ),
    # Gemini has no strict function calling.
    RequestField.TOOLS: (
        *_OPENAI_DIALECTS,
        ("DeepSeek's strict tools", _openai("deepseek"), True),
        ("llama.cpp's grammar", _llama_cpp, False),
    ),
}
"""The strict dialects providers send the schema on a field in, OpenAI's first (exact
most often: the rest are not loaded then). Each is loaded when first asked, as the
adapters load theirs. A grammar backend that does not report what it enforces (vLLM's,
Fireworks') is never exact, so it is not asked."""


def _rewritten(
    schema: Mapping[str, Any], rewrite: Callable[[Mapping[str, Any]], Rewrite], object_root: bool
) -> list[tuple[str, str]]:
    """The notes of `schema` rewritten, as (pointer, message): a root that is no object
    wrapped first where the dialect takes only objects, as extraction wraps it, and its
    notes' pointers read as the unwrapped schema's."""
    if not object_root or object_rooted(dict(schema)):
        return [(display(note.pointer), note.message) for note in rewrite(schema).notes]
    inner = {key: value for key, value in schema.items() if key not in _HOISTED}
    wrapper: dict[str, Any] = {
        "type": "object",
        "properties": {ROOT_KEY: inner},
        "required": [ROOT_KEY],
        "additionalProperties": False,
    }
    wrapper.update((key, value) for key, value in schema.items() if key in _HOISTED)
    prefix = f"/properties/{ROOT_KEY}"
    return [
        (
            _unwrapped(display(note.pointer), prefix),
            note.message.replace(f"`{prefix}`", "`/`").replace(f"`{prefix}/", "`/"),
        )
        for note in rewrite(wrapper).notes
    ]


def _unwrapped(pointer: str, prefix: str) -> str:
    """A pointer into the wrapped schema as the unwrapped one's (its value is the root)."""
    if pointer == prefix or pointer.startswith(f"{prefix}/"):
        return display(pointer.removeprefix(prefix))
    return pointer


_HOISTED = ("$defs", "definitions", "$schema")
"""Root keywords that stay at the root of a wrapped schema (its `$ref`s point there)."""


def _related(one: str, other: str) -> bool:
    """Whether one of two places holds the other (or they are the same)."""
    return _within(one, [other]) or _within(other, [one])


def _within(pointer: str, places: list[str]) -> bool:
    """Whether `pointer` is one of `places`, or inside one (`/` holds every place)."""
    return any(
        place == "/" or pointer == place or pointer.startswith(f"{place}/") for place in places
    )


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
