"""The events a streamed response is made of."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, JsonValue

from allama.types._base import Data
from allama.types._fields import Warning
from allama.types._finish import FinishReason
from allama.types._redact import withheld
from allama.types._usage import Usage


class StreamBlockType(StrEnum):
    TEXT = "text"
    TOOL_CALL = "tool_call"
    REASONING = "reasoning"
    REFUSAL = "refusal"


class ResponseStart(Data):
    type: Literal["response_start"] = "response_start"
    id: str | None = None
    model: str | None = None


class BlockStart(Data):
    """A content block opens at `index`; a tool call names its id and tool here."""

    type: Literal["block_start"] = "block_start"
    index: int
    block_type: StreamBlockType
    id: str | None = None
    name: str | None = None


class BlockStop(Data):
    type: Literal["block_stop"] = "block_stop"
    index: int


class TextDelta(Data):
    type: Literal["text_delta"] = "text_delta"
    index: int
    text: str

    def __repr__(self) -> str:
        return f"TextDelta(index={self.index}, text={withheld(self.text)})"


class ToolCallDelta(Data):
    """A piece of a tool call's raw JSON arguments."""

    type: Literal["tool_call_delta"] = "tool_call_delta"
    index: int
    arguments: str

    def __repr__(self) -> str:
        return f"ToolCallDelta(index={self.index}, arguments={withheld(self.arguments)})"


class ReasoningDelta(Data):
    """A piece of reasoning text, or the signature / encrypted content that seals it, with
    the provider that issued them (`Reasoning.issuer`)."""

    type: Literal["reasoning_delta"] = "reasoning_delta"
    index: int
    text: str = ""
    signature: str | None = None
    encrypted_content: str | None = None
    issuer: str | None = None

    def __repr__(self) -> str:
        return f"ReasoningDelta(index={self.index}, text={withheld(self.text)})"


class RefusalDelta(Data):
    type: Literal["refusal_delta"] = "refusal_delta"
    index: int
    text: str

    def __repr__(self) -> str:
        return f"RefusalDelta(index={self.index}, text={withheld(self.text)})"


class UsageEvent(Data):
    """Usage so far. Counts it reports replace earlier ones (providers report running totals)."""

    type: Literal["usage"] = "usage"
    usage: Usage


class WarningEvent(Data):
    type: Literal["warning"] = "warning"
    warning: Warning


class ProviderDataEvent(Data):
    """A provider-specific value for `ChatResponse.provider_data`."""

    type: Literal["provider_data"] = "provider_data"
    namespace: str
    key: str
    value: JsonValue

    def __repr__(self) -> str:
        # Values such as a decline explanation are the model's words.
        return f"ProviderDataEvent(namespace={self.namespace!r}, key={self.key!r})"


class Finish(Data):
    """The response finished. Nothing but usage, warnings and provider data may follow, and
    a content filter's verdict that came after the answer's end: a second `Finish` that
    says `content_filter`, which stands (Azure's Asynchronous Filter)."""

    type: Literal["finish"] = "finish"
    finish_reason: FinishReason | None = None


StreamEvent = Annotated[
    ResponseStart
    | BlockStart
    | BlockStop
    | TextDelta
    | ToolCallDelta
    | ReasoningDelta
    | RefusalDelta
    | UsageEvent
    | WarningEvent
    | ProviderDataEvent
    | Finish,
    Field(discriminator="type"),
]
