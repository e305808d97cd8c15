"""The OpenAI Chat Completions dialect, which most endpoints speak: sans-I/O.

`encode_request` turns a `ChatRequest` into an `HttpRequest` (warnings in `Degradations`),
`decode_response` turns a response into a `ChatResponse` or raises its `allama.Error`, and
`ChatStreamDecoder` turns stream bytes into stream events incrementally. A `WireProfile`
says how one endpoint speaks the dialect; a `CapabilityTable` what its models can do.
`ANNOTATIONS_KEY`, `REASONING_DETAILS_KEY` and `USAGE_COST_KEY` name what a response keeps
in `provider_data[provider]` that allama has no type for.
"""

from typing import TYPE_CHECKING

from allama._lazy import lazy_names

if TYPE_CHECKING:
    from allama.adapters.openai_compat._capabilities import (
        CAPABILITY_TABLES,
        CapabilityTable,
        ModelFamily,
        StructuredLevel,
    )
    from allama.adapters.openai_compat._decode import (
        ANNOTATIONS_KEY,
        REASONING_DETAILS_KEY,
        USAGE_COST_KEY,
        decode_body,
        decode_response,
    )
    from allama.adapters.openai_compat._encode import BODY_OPTION, encode_request
    from allama.adapters.openai_compat._errors import (
        error_from_payload,
        error_from_response,
        retry_after_seconds,
    )
    from allama.adapters.openai_compat._profile import SchemaDialect, WireProfile
    from allama.adapters.openai_compat._sse import ChatStreamDecoder, SseParser, decode_stream

__all__ = [
    "ANNOTATIONS_KEY",
    "BODY_OPTION",
    "CAPABILITY_TABLES",
    "CapabilityTable",
    "ChatStreamDecoder",
    "ModelFamily",
    "REASONING_DETAILS_KEY",
    "SchemaDialect",
    "SseParser",
    "StructuredLevel",
    "USAGE_COST_KEY",
    "WireProfile",
    "decode_body",
    "decode_response",
    "decode_stream",
    "encode_request",
    "error_from_payload",
    "error_from_response",
    "retry_after_seconds",
]

_getattr, __dir__ = lazy_names(
    __name__,
    {
        "allama.adapters.openai_compat._capabilities": (
            "CAPABILITY_TABLES",
            "CapabilityTable",
            "ModelFamily",
            "StructuredLevel",
        ),
        "allama.adapters.openai_compat._decode": (
            "ANNOTATIONS_KEY",
            "REASONING_DETAILS_KEY",
            "USAGE_COST_KEY",
            "decode_body",
            "decode_response",
        ),
        "allama.adapters.openai_compat._encode": ("BODY_OPTION", "encode_request"),
        "allama.adapters.openai_compat._errors": (
            "error_from_payload",
            "error_from_response",
            "retry_after_seconds",
        ),
        "allama.adapters.openai_compat._profile": ("SchemaDialect", "WireProfile"),
        "allama.adapters.openai_compat._sse": ("ChatStreamDecoder", "SseParser", "decode_stream"),
    },
)
if not TYPE_CHECKING:
    __getattr__ = _getattr
