"""The OpenAI Responses API dialect (`POST /responses`): sans-I/O.

`encode_request` turns a `ChatRequest` into an `HttpRequest` (warnings in `Degradations`),
`decode_response` turns a response into a `ChatResponse` or raises its `allama.Error`, and
`ResponsesStreamDecoder` turns stream bytes into stream events incrementally. An endpoint
speaks it as its Chat Completions `WireProfile` says, and its models can do what their
Chat Completions `CapabilityTable` says: `allama.provider("openai", api="responses")`.
"""

from typing import TYPE_CHECKING

from allama._lazy import lazy_names

if TYPE_CHECKING:
    from allama.adapters.openai_responses._decode import (
        ANNOTATIONS_KEY,
        ITEMS_KEY,
        NAMESPACE,
        decode_body,
        decode_object,
        decode_response,
    )
    from allama.adapters.openai_responses._encode import BODY_OPTION, encode_request
    from allama.adapters.openai_responses._errors import (
        error_from_failed,
        error_from_payload,
        error_from_response,
    )
    from allama.adapters.openai_responses._sse import ResponsesStreamDecoder, decode_stream

__all__ = [
    "ANNOTATIONS_KEY",
    "BODY_OPTION",
    "ITEMS_KEY",
    "NAMESPACE",
    "ResponsesStreamDecoder",
    "decode_body",
    "decode_object",
    "decode_response",
    "decode_stream",
    "encode_request",
    "error_from_failed",
    "error_from_payload",
    "error_from_response",
]

_getattr, __dir__ = lazy_names(
    __name__,
    {
        "allama.adapters.openai_responses._decode": (
            "ANNOTATIONS_KEY",
            "ITEMS_KEY",
            "NAMESPACE",
            "decode_body",
            "decode_object",
            "decode_response",
        ),
        "allama.adapters.openai_responses._encode": ("BODY_OPTION", "encode_request"),
        "allama.adapters.openai_responses._errors": (
            "error_from_failed",
            "error_from_payload",
            "error_from_response",
        ),
        "allama.adapters.openai_responses._sse": ("ResponsesStreamDecoder", "decode_stream"),
    },
)
if not TYPE_CHECKING:
    __getattr__ = _getattr
