"""The vocabulary's names and answers: plain enums, with no pydantic model among them.

Kept apart from the models so that the modules that only name things (errors, capability
tables, presets, a provider being built) load without building any model.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "CapabilitySupport",
    "ChatCapability",
    "ReasoningEffort",
    "RequestField",
    "UnsupportedPolicy",
    "UnsupportedStage",
    "ValidationCoverage",
    "WarningKind",
]


class ChatCapability(StrEnum):
    """A question extraction and callers ask of a provider about one model.

    `RESPONSE_SCHEMA_ANY_ROOT` and `TOOL_SCHEMA_ANY_ROOT`: whether a response format's
    schema, and a tool's parameters, may have a root that is not an object (an array, an
    enum, a union). Where the answer is not `SUPPORTED`, extraction wraps such a type in a
    one-property object and unwraps the answer.

    `LOGPROBS`: whether the model reports the log-probabilities of its output tokens
    (`ChatRequest.logprobs`). `CHOICE_OUTPUT`: whether the provider constrains a plain-text
    answer to one of a list of strings (`ResponseFormat.choice`).
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
    LOGPROBS = "logprobs"
    CHOICE_OUTPUT = "choice_output"


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


class RequestField(StrEnum):
    """A field of a `ChatRequest`, as warnings and unsupported errors name it."""

    MODEL = "model"
    MESSAGES = "messages"
    SYSTEM = "system"
    IMAGES = "images"
    DOCUMENTS = "documents"
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
    LOGPROBS = "logprobs"
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
