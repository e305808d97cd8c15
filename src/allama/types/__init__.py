"""The vocabulary: plain, immutable data with a JSON round trip. No I/O here."""

from allama.types._base import Data
from allama.types._capabilities import (
    CapabilitySupport,
    ChatCapability,
    ChatValidation,
    ValidationCoverage,
)
from allama.types._content import (
    ContentBlock,
    ImagePart,
    Reasoning,
    Refusal,
    TextPart,
    ToolCall,
    UserPart,
)
from allama.types._fields import (
    FieldSubject,
    MessageSubject,
    ReasoningEffort,
    RequestField,
    Subject,
    ToolSubject,
    UnsupportedPolicy,
    UnsupportedStage,
    Warning,
    WarningKind,
)
from allama.types._finish import FinishReason
from allama.types._messages import (
    AssistantMessage,
    DeveloperMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from allama.types._options import ProviderOption
from allama.types._request import ChatRequest
from allama.types._response import ALLAMA_NAMESPACE, DECLINE_EXPLANATION_KEY, ChatResponse
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
