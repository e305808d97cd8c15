"""What a model can do, and how much of a request a provider can check without sending it."""

from __future__ import annotations

from enum import StrEnum

from allama.types._base import Data
from allama.types._fields import Warning


class ChatCapability(StrEnum):
    """A question extraction and callers ask of a provider about one model.

    `RESPONSE_SCHEMA_ANY_ROOT` and `TOOL_SCHEMA_ANY_ROOT`: whether a response format's
    schema, and a tool's parameters, may have a root that is not an object (an array, an
    enum, a union). Where the answer is not `SUPPORTED`, extraction wraps such a type in a
    one-property object and unwraps the answer.
    """

    STRUCTURED_OUTPUT = "structured_output"
    TOOL_CALLS = "tool_calls"
    FORCED_TOOL_CHOICE = "forced_tool_choice"
    STREAMING = "streaming"
    REASONING = "reasoning"
    IMAGE_INPUT = "image_input"
    PARALLEL_TOOL_CALLS = "parallel_tool_calls"
    RESPONSE_SCHEMA_ANY_ROOT = "response_schema_any_root"
    TOOL_SCHEMA_ANY_ROOT = "tool_schema_any_root"


class CapabilitySupport(StrEnum):
    """A capability answer. `UNKNOWN` never blocks a request: the provider decides."""

    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"
    UNKNOWN = "unknown"


class ValidationCoverage(StrEnum):
    """How much of a call `validate_chat_request` checked.

    `ENCODING`: a full dry run of the encoding, so its warnings are the ones the call would
    report. `CAPABILITIES`: only the capability table was consulted.
    """

    ENCODING = "encoding"
    CAPABILITIES = "capabilities"


class ChatValidation(Data):
    """The result of validating a request without sending it."""

    coverage: ValidationCoverage
    warnings: tuple[Warning, ...] = ()

    def with_warning(self, warning: Warning) -> ChatValidation:
        return self.model_copy(update={"warnings": (*self.warnings, warning)})
