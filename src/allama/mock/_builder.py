"""Build a `ChatResponse` in one expression, for tests."""

from __future__ import annotations

from typing import Self

from pydantic import JsonValue

from allama.types import (
    ChatResponse,
    ContentBlock,
    FinishReason,
    Reasoning,
    Refusal,
    TextPart,
    ToolCall,
    Usage,
    Warning,
)


class ChatResponseBuilder:
    """A response with the blocks, usage, finish reason, warnings and provider data you give.

    The finish reason defaults to `tool_calls` when there is a tool call, else `stop`.

    >>> ChatResponseBuilder().text("hi").usage(3, 1).build().usage.output_tokens
    1
    """

    def __init__(self) -> None:
        self._content: list[ContentBlock] = []
        self._finish: FinishReason | None = None
        self._finish_set = False
        self._usage: Usage | None = None
        self._warnings: list[Warning] = []
        self._provider_data: dict[str, dict[str, JsonValue]] = {}
        self._model: str | None = None
        self._provider: str | None = None
        self._id: str | None = None

    def text(self, text: str) -> Self:
        self._content.append(TextPart(text=text))
        return self

    def tool_call(self, id: str, name: str, arguments: JsonValue | str = None) -> Self:
        """A tool call; `arguments` as a value, or as raw JSON text when it is a `str`."""
        if isinstance(arguments, str):
            self._content.append(ToolCall(id=id, name=name, arguments=arguments))
        else:
            self._content.append(ToolCall.of(id, name, {} if arguments is None else arguments))
        return self

    def refusal(self, text: str) -> Self:
        self._content.append(Refusal(text=text))
        return self

    def reasoning(self, text: str, *, signature: str | None = None) -> Self:
        self._content.append(Reasoning(text=text, signature=signature))
        return self

    def block(self, block: ContentBlock) -> Self:
        self._content.append(block)
        return self

    def usage(self, input_tokens: int, output_tokens: int) -> Self:
        self._usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
        return self

    def usage_value(self, usage: Usage) -> Self:
        self._usage = usage
        return self

    def finish_reason(self, reason: FinishReason | str | None) -> Self:
        self._finish = None if reason is None else FinishReason(reason)
        self._finish_set = True
        return self

    def warning(self, warning: Warning) -> Self:
        self._warnings.append(warning)
        return self

    def provider_data(self, namespace: str, key: str, value: JsonValue) -> Self:
        self._provider_data.setdefault(namespace, {})[key] = value
        return self

    def model(self, model: str) -> Self:
        self._model = model
        return self

    def provider(self, provider: str) -> Self:
        self._provider = provider
        return self

    def id(self, id: str) -> Self:
        self._id = id
        return self

    def build(self) -> ChatResponse:
        finish = self._finish
        if not self._finish_set:
            has_call = any(isinstance(block, ToolCall) for block in self._content)
            finish = FinishReason.TOOL_CALLS if has_call else FinishReason.STOP
        return ChatResponse(
            tuple(self._content),
            finish_reason=finish,
            usage=self._usage,
            warnings=tuple(self._warnings),
            provider_data=self._provider_data,
            model=self._model,
            provider=self._provider,
            id=self._id,
        )
