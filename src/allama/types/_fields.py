"""Names for the parts of a request, the policy for what a provider cannot do, and warnings."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from allama.types._base import Data


class RequestField(StrEnum):
    """A field of a `ChatRequest`, as warnings and unsupported errors name it."""

    MODEL = "model"
    MESSAGES = "messages"
    SYSTEM = "system"
    IMAGES = "images"
    TOOLS = "tools"
    TOOL_CHOICE = "tool_choice"
    TOOL_RESULT_ERROR = "tool_result_error"
    RESPONSE_FORMAT = "response_format"
    TEMPERATURE = "temperature"
    TOP_P = "top_p"
    MAX_OUTPUT_TOKENS = "max_output_tokens"
    STOP = "stop"
    SEED = "seed"
    REASONING_EFFORT = "reasoning_effort"
    PARALLEL_TOOL_CALLS = "parallel_tool_calls"
    REASONING = "reasoning"
    OPTIONS = "options"


class UnsupportedPolicy(StrEnum):
    """What an adapter does with a request field its provider cannot honour.

    `WARN` sends the request without it and says so in a warning; `ERROR` refuses
    before anything is sent.
    """

    WARN = "warn"
    ERROR = "error"


class UnsupportedStage(StrEnum):
    """Where an unsupported field was refused: by the adapter before sending, or by the provider."""

    BEFORE_SENDING = "before_sending"
    PROVIDER = "provider"


class ReasoningEffort(StrEnum):
    NONE = "none"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class WarningKind(StrEnum):
    """`UNSUPPORTED`: the provider will not honour it. `APPROXIMATED`: honoured, but widened."""

    UNSUPPORTED = "unsupported"
    APPROXIMATED = "approximated"


class FieldSubject(Data):
    type: Literal["field"] = "field"
    field: RequestField


class MessageSubject(Data):
    type: Literal["message"] = "message"
    index: int


class ToolSubject(Data):
    type: Literal["tool"] = "tool"
    name: str


Subject = Annotated[FieldSubject | MessageSubject | ToolSubject, Field(discriminator="type")]
"""What a warning is about: a request field, a message by index, or a tool by name."""


class Warning(Data):
    """Something the provider did not do as asked, and how far it fell short.

    >>> Warning.unsupported(RequestField.SEED, "seed is not supported").kind
    <WarningKind.UNSUPPORTED: 'unsupported'>
    """

    kind: WarningKind
    subject: Subject
    message: str
    code: str | None = None
    provider: str | None = None

    @classmethod
    def unsupported(cls, field: RequestField, message: str, *, code: str | None = None) -> Warning:
        return cls(
            kind=WarningKind.UNSUPPORTED,
            subject=FieldSubject(field=field),
            message=message,
            code=code,
        )

    @classmethod
    def approximated(cls, field: RequestField, message: str, *, code: str | None = None) -> Warning:
        return cls(
            kind=WarningKind.APPROXIMATED,
            subject=FieldSubject(field=field),
            message=message,
            code=code,
        )

    def with_provider(self, provider: str) -> Warning:
        return self.model_copy(update={"provider": provider})

    def is_about(self, field: RequestField) -> bool:
        """Whether this warning is about the request field `field`."""
        return isinstance(self.subject, FieldSubject) and self.subject.field == field
