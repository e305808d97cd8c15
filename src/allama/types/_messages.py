"""The turns of a conversation."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, StrictBool

from allama.types._base import Data, kinds_listed
from allama.types._content import (
    ContentBlock,
    DocumentPart,
    ImagePart,
    Reasoning,
    Refusal,
    TextPart,
    ToolCall,
    UserPart,
    text_of,
)
from allama.types._redact import withheld


class SystemMessage(Data):
    role: Literal["system"] = "system"
    content: str

    def text(self) -> str:
        return self.content

    def __repr__(self) -> str:
        return f"SystemMessage(content={withheld(self.content)})"


class DeveloperMessage(Data):
    """Instructions from the application, for providers that tell them apart from system ones."""

    role: Literal["developer"] = "developer"
    content: str

    def text(self) -> str:
        return self.content

    def __repr__(self) -> str:
        return f"DeveloperMessage(content={withheld(self.content)})"


class UserMessage(Data):
    role: Literal["user"] = "user"
    content: tuple[UserPart, ...]

    def text(self) -> str | None:
        """The text parts joined; `None` when the message has only images."""
        return text_of(self.content)

    @property
    def images(self) -> tuple[ImagePart, ...]:
        return tuple(part for part in self.content if isinstance(part, ImagePart))

    @property
    def documents(self) -> tuple[DocumentPart, ...]:
        return tuple(part for part in self.content if isinstance(part, DocumentPart))

    def __repr__(self) -> str:
        return f"UserMessage(parts={len(self.content)})"


class AssistantMessage(Data):
    """A turn the model took: text, tool calls, refusals and reasoning, in order."""

    role: Literal["assistant"] = "assistant"
    content: tuple[ContentBlock, ...]
    provider_data: dict[str, dict[str, JsonValue]] = Field(
        default_factory=dict, exclude_if=lambda data: not data
    )
    """What the provider that took the turn needs back, verbatim, to continue it (a turn
    Anthropic paused in a server tool's run), by namespace: `ChatResponse.to_assistant_message()`
    fills it, only that provider reads it, and it is left out of the JSON form when empty."""

    def text(self) -> str | None:
        return text_of(self.content)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(block for block in self.content if isinstance(block, ToolCall))

    def __hash__(self) -> int:
        # Hashable as the other messages are: `provider_data` (a dict) is left out, so
        # messages equal in it hash alike, and ones that differ only there collide.
        return hash((self.role, self.content))

    def __repr__(self) -> str:
        kinds = kinds_listed([block.type for block in self.content])
        return f"AssistantMessage(blocks=[{kinds}])"


class ToolMessage(Data):
    """The result of a tool call, sent back to the model.

    `is_error` marks a failed call; not every provider has a flag for it.
    """

    role: Literal["tool"] = "tool"
    tool_call_id: str
    content: str
    is_error: StrictBool = False
    """A bool: text (`"true"`) or a number is refused, not read as a flag."""

    def text(self) -> str:
        return self.content

    def __repr__(self) -> str:
        return (
            f"ToolMessage(tool_call_id={self.tool_call_id!r}, content={withheld(self.content)}, "
            f"is_error={self.is_error})"
        )


Message = Annotated[
    SystemMessage | DeveloperMessage | UserMessage | AssistantMessage | ToolMessage,
    Field(discriminator="role"),
]

__all__ = [
    "AssistantMessage",
    "DeveloperMessage",
    "ImagePart",
    "Message",
    "Reasoning",
    "Refusal",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolMessage",
    "UserMessage",
]
