"""Ollama's native dialect (`POST /api/chat`), on a local server or a hosted one: sans-I/O.

`encode_request` turns a `ChatRequest` into an `HttpRequest` (warnings in `Degradations`),
`decode_response` turns a response into a `ChatResponse` or raises its `allama.Error`, and
`OllamaStreamDecoder` turns stream bytes (NDJSON) into stream events incrementally. An
`OllamaProfile` names the endpoint; an `OllamaTable` says what its models can do.
"""

from typing import TYPE_CHECKING

from allama._lazy import lazy_names

if TYPE_CHECKING:
    from allama.adapters.ollama._capabilities import (
        CAPABILITY_TABLES,
        OllamaFamily,
        OllamaTable,
        Thinking,
    )
    from allama.adapters.ollama._decode import decode_response
    from allama.adapters.ollama._encode import BODY_OPTION, encode_request
    from allama.adapters.ollama._errors import error_from_payload, error_from_response
    from allama.adapters.ollama._profile import OllamaProfile
    from allama.adapters.ollama._stream import OllamaStreamDecoder, decode_stream

__all__ = [
    "BODY_OPTION",
    "CAPABILITY_TABLES",
    "OllamaFamily",
    "OllamaProfile",
    "OllamaStreamDecoder",
    "OllamaTable",
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
        "allama.adapters.ollama._capabilities": (
            "CAPABILITY_TABLES",
            "OllamaFamily",
            "OllamaTable",
            "Thinking",
        ),
        "allama.adapters.ollama._decode": ("decode_response",),
        "allama.adapters.ollama._encode": ("BODY_OPTION", "encode_request"),
        "allama.adapters.ollama._errors": ("error_from_payload", "error_from_response"),
        "allama.adapters.ollama._profile": ("OllamaProfile",),
        "allama.adapters.ollama._stream": ("OllamaStreamDecoder", "decode_stream"),
    },
)
if not TYPE_CHECKING:
    __getattr__ = _getattr
