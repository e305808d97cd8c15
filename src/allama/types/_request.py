"""A chat request: the model, the conversation and every setting, as one immutable value."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Annotated, Any, TypeVar

from pydantic import Field, JsonValue, TypeAdapter, ValidationError

from allama.types._base import Data
from allama.types._content import ContentBlock, ImagePart, TextPart, ToolCall, UserPart
from allama.types._fields import ReasoningEffort, UnsupportedPolicy
from allama.types._messages import (
    AssistantMessage,
    DeveloperMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from allama.types._options import dump_option, load_option, namespace_of
from allama.types._tools import ResponseFormat, ToolChoice, ToolDefinition

T = TypeVar("T")


class ChatRequest(Data):
    """What to ask which model. Every `with_…` and message method returns an updated copy.

    >>> request = ChatRequest("gpt-5-mini").system("Be brief.").user("Hi").with_temperature(0.2)
    >>> [m.role for m in request.messages], request.temperature
    (['system', 'user'], 0.2)
    """

    model: str
    messages: tuple[Message, ...] = ()
    tools: tuple[ToolDefinition, ...] = ()
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    stop: tuple[str, ...] = ()
    seed: int | None = None
    reasoning_effort: ReasoningEffort | None = None
    parallel_tool_calls: bool | None = None
    unsupported_policy: UnsupportedPolicy = UnsupportedPolicy.WARN
    options: dict[str, JsonValue] = Field(default_factory=dict)

    def __init__(self, model: str | None = None, /, **data: Any) -> None:
        if model is not None:
            data["model"] = model
        super().__init__(**data)

    def __repr__(self) -> str:
        roles = ", ".join(message.role for message in self.messages)
        extras = [f"tools={len(self.tools)}"] if self.tools else []
        if self.response_format is not None:
            extras.append(f"response_format={self.response_format.type}")
        tail = "".join(f", {extra}" for extra in extras)
        return f"ChatRequest(model={self.model!r}, messages=[{roles}]{tail})"

    def _with(self, **update: Any) -> ChatRequest:
        # `model_copy` does not validate, so settings are checked here, field by field, as
        # the constructor would check them (`"0.5"` becomes `0.5`, a word for a seed fails).
        for name in update.keys() & _CHECKED:
            update[name] = _checked(name, update[name])
        return self.model_copy(update=update)

    # Messages

    def push(self, *messages: Message) -> ChatRequest:
        """Append messages as they are."""
        return self._with(messages=(*self.messages, *messages))

    def extend_messages(self, messages: Iterable[Message]) -> ChatRequest:
        return self.push(*messages)

    def system(self, text: str) -> ChatRequest:
        return self.push(SystemMessage(content=text))

    def developer(self, text: str) -> ChatRequest:
        return self.push(DeveloperMessage(content=text))

    def user(self, text: str | None = None, *images: ImagePart) -> ChatRequest:
        """A user turn: its text, then any images."""
        parts: list[UserPart] = [TextPart(text=text)] if text is not None else []
        parts.extend(images)
        if not parts:
            raise ValueError("a user message needs text or at least one image")
        return self.push(UserMessage(content=tuple(parts)))

    def assistant(self, content: str | Iterable[ContentBlock]) -> ChatRequest:
        """An assistant turn: its text, or the blocks of an earlier response."""
        blocks: tuple[ContentBlock, ...] = (
            (TextPart(text=content),) if isinstance(content, str) else tuple(content)
        )
        return self.push(AssistantMessage(content=blocks))

    def tool_result(
        self, call: ToolCall | str, content: str, *, is_error: bool = False
    ) -> ChatRequest:
        """The result of a tool call (the call itself or its id)."""
        call_id = call.id if isinstance(call, ToolCall) else call
        return self.push(ToolMessage(tool_call_id=call_id, content=content, is_error=is_error))

    # Settings

    def with_tools(self, tools: Iterable[ToolDefinition]) -> ChatRequest:
        return self._with(tools=tuple(tools))

    def add_tool(self, tool: ToolDefinition) -> ChatRequest:
        return self._with(tools=(*self.tools, tool))

    def without_tools(self) -> ChatRequest:
        """The same request with neither tools nor a tool choice."""
        return self._with(tools=(), tool_choice=None)

    def with_tool_choice(self, choice: ToolChoice | None) -> ChatRequest:
        return self._with(tool_choice=choice)

    def with_response_format(self, response_format: ResponseFormat | None) -> ChatRequest:
        return self._with(response_format=response_format)

    def with_temperature(self, temperature: float | None) -> ChatRequest:
        return self._with(temperature=temperature)

    def with_top_p(self, top_p: float | None) -> ChatRequest:
        return self._with(top_p=top_p)

    def with_max_output_tokens(self, tokens: int | None) -> ChatRequest:
        if tokens is not None and tokens < 1:
            raise ValueError(f"max_output_tokens must be at least 1, not {tokens}")
        return self._with(max_output_tokens=tokens)

    def with_stop(self, *stop: str) -> ChatRequest:
        return self._with(stop=stop)

    def with_seed(self, seed: int | None) -> ChatRequest:
        return self._with(seed=seed)

    def with_reasoning_effort(self, effort: ReasoningEffort | None) -> ChatRequest:
        return self._with(reasoning_effort=effort)

    def with_parallel_tool_calls(self, parallel: bool | None) -> ChatRequest:
        return self._with(parallel_tool_calls=parallel)

    def with_unsupported_policy(self, policy: UnsupportedPolicy) -> ChatRequest:
        return self._with(unsupported_policy=policy)

    # Typed options by namespace

    def with_option(self, value: Any, *, namespace: str | None = None) -> ChatRequest:
        """Attach a typed option, stored under its type's `__option_namespace__`.

        >>> from allama import ExtractionMode
        >>> ChatRequest("m").with_option(ExtractionMode.NATIVE).option(ExtractionMode)
        <ExtractionMode.NATIVE: 'native'>
        """
        key = namespace or namespace_of(type(value))
        return self._with(options={**self.options, key: dump_option(value)})

    def with_option_json(self, namespace: str, value: JsonValue) -> ChatRequest:
        """Attach an option as raw JSON, for a provider feature allama has no type for."""
        return self._with(options={**self.options, namespace: value})

    def option(self, cls: type[T], *, namespace: str | None = None) -> T | None:
        """The option of type `cls`, or `None`; raises `ValueError` when it is malformed."""
        raw = self.options.get(namespace or namespace_of(cls))
        return None if raw is None else load_option(cls, raw)

    def option_json(self, namespace: str) -> JsonValue | None:
        return self.options.get(namespace)

    def without_option(self, cls_or_namespace: type[Any] | str) -> ChatRequest:
        key = (
            cls_or_namespace
            if isinstance(cls_or_namespace, str)
            else namespace_of(cls_or_namespace)
        )
        if key not in self.options:
            return self
        return self._with(options={k: v for k, v in self.options.items() if k != key})


_CHECKED = frozenset(
    {
        "tool_choice",
        "response_format",
        "temperature",
        "top_p",
        "max_output_tokens",
        "stop",
        "seed",
        "reasoning_effort",
        "parallel_tool_calls",
        "unsupported_policy",
    }
)
"""The settings the `with_…` methods take from the caller. Messages and tools are built by
the request's own methods from validated parts, and are not checked again."""


@cache
def _field_adapter(name: str) -> TypeAdapter[Any]:
    field = ChatRequest.model_fields[name]
    annotation: Any = field.annotation
    if field.metadata:
        annotation = Annotated[annotation, *field.metadata]
    return TypeAdapter(annotation)


def _checked(name: str, value: Any) -> Any:
    try:
        return _field_adapter(name).validate_python(value)
    except ValidationError as error:
        reason = error.errors(include_url=False)[0]["msg"]
        raise ValueError(f"invalid `{name}`: {reason}") from None
