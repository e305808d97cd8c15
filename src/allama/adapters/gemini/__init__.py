"""The Gemini dialect (`generateContent`), on the Gemini API and Vertex AI: sans-I/O.

`encode_request` turns a `ChatRequest` into an `HttpRequest` (warnings in `Degradations`),
`decode_response` turns a response into a `ChatResponse` or raises its `allama.Error`, and
`GenerateStreamDecoder` turns stream bytes (SSE, or a streamed JSON array) into stream
events incrementally. A `GeminiProfile` names the endpoint; a `GeminiTable` says what its
models can do.
"""

from typing import TYPE_CHECKING

from allama._lazy import lazy_names

if TYPE_CHECKING:
    from allama.adapters.gemini._capabilities import (
        CAPABILITY_TABLES,
        GeminiFamily,
        GeminiTable,
        SchemaSurface,
        Thinking,
    )
    from allama.adapters.gemini._decode import decode_response
    from allama.adapters.gemini._encode import BODY_OPTION, THINKING_BUDGETS, encode_request
    from allama.adapters.gemini._errors import error_from_payload, error_from_response
    from allama.adapters.gemini._profile import GeminiProfile
    from allama.adapters.gemini._stream import GenerateStreamDecoder, decode_stream

__all__ = [
    "BODY_OPTION",
    "CAPABILITY_TABLES",
    "THINKING_BUDGETS",
    "GeminiFamily",
    "GeminiProfile",
    "GeminiTable",
    "GenerateStreamDecoder",
    "SchemaSurface",
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
        "allama.adapters.gemini._capabilities": (
            "CAPABILITY_TABLES",
            "GeminiFamily",
            "GeminiTable",
            "SchemaSurface",
            "Thinking",
        ),
        "allama.adapters.gemini._decode": ("decode_response",),
        "allama.adapters.gemini._encode": ("BODY_OPTION", "THINKING_BUDGETS", "encode_request"),
        "allama.adapters.gemini._errors": ("error_from_payload", "error_from_response"),
        "allama.adapters.gemini._profile": ("GeminiProfile",),
        "allama.adapters.gemini._stream": ("GenerateStreamDecoder", "decode_stream"),
    },
)
if not TYPE_CHECKING:
    __getattr__ = _getattr
