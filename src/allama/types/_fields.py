"""Names for the parts of a request, the policy for what a provider cannot do, and warnings."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from allama.types._base import Data
from allama.types._names import (
    ReasoningEffort,
    RequestField,
    UnsupportedPolicy,
    UnsupportedStage,
    WarningKind,
)

__all__ = [
    "FieldSubject",
    "MessageSubject",
    "ReasoningEffort",
    "RequestField",
    "Subject",
    "ToolSubject",
    "UnsupportedPolicy",
    "UnsupportedStage",
    "Warning",
    "WarningKind",
]


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
