"""The JSON shapes of OpenAI-compatible Chat Completions, as pydantic models.

Responses and stream chunks are read through them. Request bodies are written by the
encoder directly as plain JSON data (it is the hot path of every call); `WireRequest`
describes the shape they keep, and the tests hold every encoded body to it.

Rules the wire keeps: an absent optional field is omitted (never sent as `null`), an
explicit `false` is kept, JSON keys are the wire's own (`type`, not `tool_type`), tool-call
arguments stay the raw string the provider sent, and unknown fields a provider adds are
tolerated (kept as extras), so a new field never breaks decoding. Nor does a field of a
response that allama does not read being of another type than OpenAI's (SambaNova through
Hugging Face's router sends a fractional `created`; some servers a number as the `id`, a
`null` role or index): an answer is not thrown away for its metadata (`_Metadata`).
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from allama.types._base import DEFER_BUILD

__all__ = [
    "Role",
    "WireAnswer",
    "WireChoice",
    "WireChunk",
    "WireChunkChoice",
    "WireDelta",
    "WireFunction",
    "WireFunctionCall",
    "WireFunctionCallDelta",
    "WireMessage",
    "WireRequest",
    "WireResponse",
    "WireTool",
    "WireToolCall",
    "WireToolCallDelta",
    "WireUsage",
]


class _Wire(BaseModel):
    """Omits `None` on the way out, tolerates unknown keys on the way in."""

    model_config = ConfigDict(extra="allow", defer_build=DEFER_BUILD)

    def dump(self) -> dict[str, Any]:
        """The JSON object, without the fields that are absent."""
        return self.model_dump(mode="json", exclude_none=True)

    def dump_json(self) -> str:
        return self.model_dump_json(exclude_none=True)


class Role(StrEnum):
    SYSTEM = "system"
    DEVELOPER = "developer"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    FUNCTION = "function"
    """The deprecated role of a function result; read, never written."""


_ROLES = frozenset(Role)


def _raw_arguments(value: Any) -> Any:
    # A few servers (Mistral) send arguments as an object; keep a string, as the wire
    # promises, its characters as themselves: a half escaped alone then reaches the stream's
    # reading of halves as the body's does, not hidden behind `\ud83d` again.
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _identifier(value: Any) -> Any:
    """An id as text: a number (some servers number their completions) as its digits; one
    of no usable type (an object, a list, a flag) as none. allama only passes it on."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def _text_or_none(value: Any) -> Any:
    """A string kept; anything else, which allama cannot use as one, as none."""
    return value if isinstance(value, str) else None


def _any_role(value: Any) -> Any:
    """The role of an answer or a delta, which allama does not read: a known one kept, any
    other (`null`, a word of a server's own) as none."""
    return value if isinstance(value, str) and value in _ROLES else None


def _answer_role(value: Any) -> Any:
    """The role of an answer: one allama does not know (`null`) reads as the assistant's."""
    role = _any_role(value)
    return Role.ASSISTANT if role is None else role


_UNPLACED = -1
"""The index of a choice that gave none it can use (`null`): its place in the list stands
for it (`_placed`)."""


def _index_or_unplaced(value: Any) -> Any:
    """A choice's index, or `_UNPLACED` where it gave no whole number."""
    return value if isinstance(value, int) and not isinstance(value, bool) else _UNPLACED


def _placed(choices: list[Any]) -> list[Any]:
    """Choices whose index is `_UNPLACED` given their place in the list as their index."""
    for position, choice in enumerate(choices):
        if choice.index == _UNPLACED:
            choice.index = position
    return choices


class WireFunctionCall(_Wire):
    name: str
    arguments: str = ""

    _raw = field_validator("arguments", mode="before")(_raw_arguments)


def _input_text(value: Any) -> str | None:
    text = _raw_arguments(value)
    return text if isinstance(text, str) else None


def _other_tool(call: _Wire, kind: str | None) -> dict[str, Any] | None:
    """What a call of a tool of another type than `function` holds under its type's name:
    OpenAI's `custom` tools give `{"name", "input"}`, the input free text, not JSON."""
    if not kind or kind == "function" or not call.model_extra:
        return None
    value = call.model_extra.get(kind)
    return value if isinstance(value, dict) else None


class WireToolCall(_Wire):
    """A call of a function, or of a tool of another type (`{"type": "custom", "custom":
    {"name", "input"}}`), which `named` reads alike."""

    id: str | None = None
    type: str = "function"
    function: WireFunctionCall | None = None

    @model_validator(mode="after")
    def _names_a_tool(self) -> Self:
        if self.function is None and not isinstance(
            (_other_tool(self, self.type) or {}).get("name"), str
        ):
            raise ValueError("a tool call names no function and no tool of its type")
        return self

    def named(self) -> tuple[str, str]:
        """The tool's name and the call's arguments: a function's JSON text, or the input
        of a tool of another type, as given."""
        if self.function is not None:
            return self.function.name, self.function.arguments
        other = _other_tool(self, self.type) or {}
        return str(other.get("name")), _input_text(other.get("input")) or ""


class WireMessage(_Wire):
    """A message in a request, or the assistant message of a response.

    `content` is a string, a list of parts (images in requests, Mistral's thinking blocks
    in responses), or absent. `reasoning` and `reasoning_content` are the two names servers
    use for reasoning text. `function_call` is the deprecated single call that came before
    `tool_calls`; some servers still answer with it.
    """

    role: Role = Role.ASSISTANT
    content: str | list[Any] | None = None
    refusal: str | None = None
    tool_calls: list[WireToolCall] | None = None
    function_call: WireFunctionCall | None = None
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None

    @classmethod
    def system(cls, content: str) -> Self:
        return cls(role=Role.SYSTEM, content=content)

    @classmethod
    def developer(cls, content: str) -> Self:
        return cls(role=Role.DEVELOPER, content=content)

    @classmethod
    def user(cls, content: str | list[Any]) -> Self:
        return cls(role=Role.USER, content=content)

    @classmethod
    def assistant(cls, content: str) -> Self:
        return cls(role=Role.ASSISTANT, content=content)

    @classmethod
    def tool(cls, tool_call_id: str, content: str) -> Self:
        return cls(role=Role.TOOL, tool_call_id=tool_call_id, content=content)


class WireAnswer(WireMessage):
    """The assistant message of a response. Its `role`, which allama does not read, may be
    anything (`null` from some servers): one allama does not know reads as the assistant's."""

    _role = field_validator("role", mode="before")(_answer_role)


class WireFunction(_Wire):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class WireTool(_Wire):
    type: str = "function"
    function: WireFunction

    @classmethod
    def function_tool(
        cls,
        name: str,
        description: str | None,
        parameters: dict[str, Any] | None,
        *,
        strict: bool | None = None,
    ) -> Self:
        return cls(
            function=WireFunction(
                name=name, description=description, parameters=parameters, strict=strict
            )
        )


class WireRequest(_Wire):
    """The body of `POST /chat/completions`. Provider-specific keys travel as extras."""

    model: str
    messages: list[WireMessage]
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    n: int | None = None
    seed: int | None = None
    stop: list[str] | None = None
    stream: bool | None = None
    stream_options: dict[str, Any] | None = None
    tools: list[WireTool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    reasoning_effort: str | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    grammar: str | None = None
    """llama.cpp's own field: a GBNF grammar the output must follow."""


class _Details(_Wire):
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    audio_tokens: int | None = None


class WireUsage(_Wire):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    prompt_tokens_details: _Details | None = None
    completion_tokens_details: _Details | None = None
    prompt_cache_hit_tokens: int | None = None
    cached_tokens: int | None = None
    num_cached_tokens: int | None = None


class WireChoice(_Wire):
    """One choice of a response. Azure leaves out `message` on a choice its content filter
    stopped (`finish_reason: "content_filter"`). An index of `null` is the choice's place in
    the list; `logprobs` of a shape allama does not read is left out by the decoder, with a
    warning."""

    index: int = 0
    message: WireAnswer | None = None
    finish_reason: str | None = None
    logprobs: Any = None

    _unplaced = field_validator("index", mode="before")(_index_or_unplaced)


class _Metadata(_Wire):
    """The metadata of a response or chunk, of any JSON type: allama reads none of it but
    the id (kept as text, `_identifier`) and the model (a string, else none: the requested
    model names the answer), so none of it throws a paid answer away."""

    id: str | None = None
    object: Any = None
    created: Any = None
    model: str | None = None

    _id = field_validator("id", mode="before")(_identifier)
    _model = field_validator("model", mode="before")(_text_or_none)


class WireResponse(_Metadata):
    choices: list[WireChoice] = []
    usage: WireUsage | None = None

    _in_place = field_validator("choices")(_placed)


class WireFunctionCallDelta(_Wire):
    name: str | None = None
    arguments: str | None = None

    _raw = field_validator("arguments", mode="before")(_raw_arguments)


class WireToolCallDelta(_Wire):
    index: int | None = None
    id: str | None = None
    type: str | None = None
    function: WireFunctionCallDelta | None = None

    def piece(self, kind: str | None) -> tuple[str | None, str | None]:
        """The piece of the tool's name and of the arguments this delta carries: its
        function's, or the input of a tool of another type (`kind`, as the call's first
        delta gave it, where this one does not say)."""
        if self.function is not None:
            return self.function.name, self.function.arguments
        other = _other_tool(self, self.type or kind)
        if other is None:
            return None, None
        name = other.get("name")
        return (name if isinstance(name, str) else None), _input_text(other.get("input"))


class WireDelta(_Wire):
    role: Role | None = None
    content: str | list[Any] | None = None
    refusal: str | None = None
    tool_calls: list[WireToolCallDelta] | None = None
    function_call: WireFunctionCallDelta | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None

    _role = field_validator("role", mode="before")(_any_role)


def _no_delta(value: Any) -> Any:
    # A choice the content filter stopped may carry `"delta": null`.
    return {} if value is None else value


class WireChunkChoice(_Wire):
    index: int = 0
    delta: WireDelta = Field(default_factory=WireDelta)
    finish_reason: str | None = None

    _delta = field_validator("delta", mode="before")(_no_delta)
    _unplaced = field_validator("index", mode="before")(_index_or_unplaced)


class WireChunk(_Metadata):
    """One `data:` payload of a stream. `choices` is empty on usage-only chunks."""

    choices: list[WireChunkChoice] = []
    usage: WireUsage | None = None

    _in_place = field_validator("choices")(_placed)
