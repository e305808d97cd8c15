"""Why a response ended, with the provider's own word kept for reasons we have no name for."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema


class FinishReason(str):
    """A finish reason: one of the named ones, or the provider's own string ("other").

    It is a string, so it compares with plain strings and serialises as one.

    >>> FinishReason.STOP.finished_normally()
    True
    >>> FinishReason("malformed_function_call").is_other
    True
    """

    __slots__ = ()

    STOP: ClassVar[FinishReason]
    LENGTH: ClassVar[FinishReason]
    TOOL_CALLS: ClassVar[FinishReason]
    CONTENT_FILTER: ClassVar[FinishReason]
    REFUSAL: ClassVar[FinishReason]
    CONTEXT_WINDOW: ClassVar[FinishReason]
    KNOWN: ClassVar[frozenset[str]] = frozenset(
        {"stop", "length", "tool_calls", "content_filter", "refusal", "context_window"}
    )

    @property
    def is_other(self) -> bool:
        """Not one of the named reasons: the provider's own string, kept as sent."""
        return str(self) not in self.KNOWN

    def finished_normally(self) -> bool:
        """The model ended its turn by itself (`stop`) or to call tools (`tool_calls`)."""
        return str(self) in ("stop", "tool_calls")

    def __repr__(self) -> str:
        return f"FinishReason({str(self)!r})"

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(
            cls,
            core_schema.str_schema(),
            serialization=core_schema.plain_serializer_function_ser_schema(str),
        )


FinishReason.STOP = FinishReason("stop")
FinishReason.LENGTH = FinishReason("length")
FinishReason.TOOL_CALLS = FinishReason("tool_calls")
FinishReason.CONTENT_FILTER = FinishReason("content_filter")
FinishReason.REFUSAL = FinishReason("refusal")
FinishReason.CONTEXT_WINDOW = FinishReason("context_window")
