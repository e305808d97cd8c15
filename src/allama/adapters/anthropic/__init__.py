"""The Anthropic Messages dialect (`POST /v1/messages`), which Claude speaks: sans-I/O.

`encode_request` turns a `ChatRequest` into an `HttpRequest` (warnings in `Degradations`),
`decode_response` turns a response into a `ChatResponse` or raises its `allama.Error`, and
`MessagesStreamDecoder` turns stream bytes into stream events incrementally. An
`AnthropicProfile` says how one endpoint speaks the dialect; a `ClaudeTable` what its models
can do.
"""

from typing import TYPE_CHECKING

from allama._lazy import lazy_names

if TYPE_CHECKING:
    from allama.adapters.anthropic._capabilities import (
        CAPABILITY_TABLES,
        ClaudeFamily,
        ClaudeTable,
        Thinking,
    )
    from allama.adapters.anthropic._decode import decode_response
    from allama.adapters.anthropic._encode import (
        BODY_OPTION,
        DEFAULT_MAX_TOKENS,
        THINKING_BUDGETS,
        encode_request,
    )
    from allama.adapters.anthropic._errors import error_from_payload, error_from_response
    from allama.adapters.anthropic._profile import AnthropicProfile
    from allama.adapters.anthropic._sse import MessagesStreamDecoder, decode_stream

__all__ = [
    "BODY_OPTION",
    "CAPABILITY_TABLES",
    "DEFAULT_MAX_TOKENS",
    "THINKING_BUDGETS",
    "AnthropicProfile",
    "ClaudeFamily",
    "ClaudeTable",
    "MessagesStreamDecoder",
    "Thinking",
    "decode_response",
    "decode_stream",
    "encode_request",
    "error_from_payload",
    "error_from_response",
]

_getattr, __dir__ = lazy_names(
    __name__,
    {
        "allama.adapters.anthropic._capabilities": (
            "CAPABILITY_TABLES",
            "ClaudeFamily",
            "ClaudeTable",
            "Thinking",
        ),
        "allama.adapters.anthropic._decode": ("decode_response",),
        "allama.adapters.anthropic._encode": (
            "BODY_OPTION",
            "DEFAULT_MAX_TOKENS",
            "THINKING_BUDGETS",
            "encode_request",
        ),
        "allama.adapters.anthropic._errors": ("error_from_payload", "error_from_response"),
        "allama.adapters.anthropic._profile": ("AnthropicProfile",),
        "allama.adapters.anthropic._sse": ("MessagesStreamDecoder", "decode_stream"),
    },
)
if not TYPE_CHECKING:
    __getattr__ = _getattr
