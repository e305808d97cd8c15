"""The vocabulary: plain, immutable data with a JSON round trip. No I/O here."""

from typing import TYPE_CHECKING

from allama._lazy import lazy_names

if TYPE_CHECKING:
    from allama.types._base import Data
    from allama.types._capabilities import ChatValidation
    from allama.types._content import (
        ContentBlock,
        DocumentPart,
        ImagePart,
        Reasoning,
        Refusal,
        TextPart,
        ToolCall,
        UserPart,
    )
    from allama.types._fields import FieldSubject, MessageSubject, Subject, ToolSubject, Warning
    from allama.types._finish import FinishReason
    from allama.types._logprobs import TokenAlternative, TokenLogprob
    from allama.types._messages import (
        AssistantMessage,
        DeveloperMessage,
        Message,
        SystemMessage,
        ToolMessage,
        UserMessage,
    )
    from allama.types._names import (
        CapabilitySupport,
        ChatCapability,
        ReasoningEffort,
        RequestField,
        UnsupportedPolicy,
        UnsupportedStage,
        ValidationCoverage,
        WarningKind,
    )
    from allama.types._options import ProviderOption
    from allama.types._request import ChatRequest
    from allama.types._response import (
        ALLAMA_NAMESPACE,
        DECLINE_EXPLANATION_KEY,
        SERVICE_TIER_KEY,
        ChatResponse,
    )
    from allama.types._stream import (
        BlockStart,
        BlockStop,
        Finish,
        ProviderDataEvent,
        ReasoningDelta,
        RefusalDelta,
        ResponseStart,
        StreamBlockType,
        StreamEvent,
        TextDelta,
        ToolCallDelta,
        UsageEvent,
        WarningEvent,
    )
    from allama.types._tools import ResponseFormat, ToolChoice, ToolDefinition
    from allama.types._usage import Usage

__all__ = [
    "ALLAMA_NAMESPACE",
    "DECLINE_EXPLANATION_KEY",
    "SERVICE_TIER_KEY",
    "AssistantMessage",
    "BlockStart",
    "BlockStop",
    "CapabilitySupport",
    "ChatCapability",
    "ChatRequest",
    "ChatResponse",
    "ChatValidation",
    "ContentBlock",
    "Data",
    "DeveloperMessage",
    "FieldSubject",
    "DocumentPart",
    "Finish",
    "FinishReason",
    "ImagePart",
    "Message",
    "MessageSubject",
    "ProviderDataEvent",
    "ProviderOption",
    "Reasoning",
    "ReasoningDelta",
    "ReasoningEffort",
    "Refusal",
    "RefusalDelta",
    "RequestField",
    "ResponseFormat",
    "ResponseStart",
    "StreamBlockType",
    "StreamEvent",
    "Subject",
    "SystemMessage",
    "TextDelta",
    "TextPart",
    "ToolCall",
    "ToolCallDelta",
    "ToolChoice",
    "ToolDefinition",
    "ToolMessage",
    "TokenAlternative",
    "TokenLogprob",
    "ToolSubject",
    "UnsupportedPolicy",
    "UnsupportedStage",
    "Usage",
    "UsageEvent",
    "UserMessage",
    "UserPart",
    "ValidationCoverage",
    "Warning",
    "WarningEvent",
    "WarningKind",
]

_getattr, __dir__ = lazy_names(
    __name__,
    {
        "allama.types._base": ("Data",),
        "allama.types._capabilities": ("ChatValidation",),
        "allama.types._content": (
            "ContentBlock",
            "DocumentPart",
            "ImagePart",
            "Reasoning",
            "Refusal",
            "TextPart",
            "ToolCall",
            "UserPart",
        ),
        "allama.types._fields": (
            "FieldSubject",
            "MessageSubject",
            "Subject",
            "ToolSubject",
            "Warning",
        ),
        "allama.types._names": (
            "CapabilitySupport",
            "ChatCapability",
            "ReasoningEffort",
            "RequestField",
            "UnsupportedPolicy",
            "UnsupportedStage",
            "ValidationCoverage",
            "WarningKind",
        ),
        "allama.types._finish": ("FinishReason",),
        "allama.types._logprobs": ("TokenAlternative", "TokenLogprob"),
        "allama.types._messages": (
            "AssistantMessage",
            "DeveloperMessage",
            "Message",
            "SystemMessage",
            "ToolMessage",
            "UserMessage",
        ),
        "allama.types._options": ("ProviderOption",),
        "allama.types._request": ("ChatRequest",),
        "allama.types._response": (
            "ALLAMA_NAMESPACE",
            "DECLINE_EXPLANATION_KEY",
            "SERVICE_TIER_KEY",
            "ChatResponse",
        ),
        "allama.types._stream": (
            "BlockStart",
            "BlockStop",
            "Finish",
            "ProviderDataEvent",
            "ReasoningDelta",
            "RefusalDelta",
            "ResponseStart",
            "StreamBlockType",
            "StreamEvent",
            "TextDelta",
            "ToolCallDelta",
            "UsageEvent",
            "WarningEvent",
        ),
        "allama.types._tools": ("ResponseFormat", "ToolChoice", "ToolDefinition"),
        "allama.types._usage": ("Usage",),
    },
)
if not TYPE_CHECKING:
    __getattr__ = _getattr
