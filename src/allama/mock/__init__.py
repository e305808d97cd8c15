"""Testing aids: scripted providers, a response builder, and a provider that answers anything.

>>> from allama.mock import MockProvider
>>> MockProvider.with_text("hi").chat(__import__("allama").ChatRequest("m").user("?")).text()
'hi'
"""

from typing import TYPE_CHECKING

from allama._lazy import lazy_names

if TYPE_CHECKING:
    from allama.mock._builder import ChatResponseBuilder
    from allama.mock._events import response_events
    from allama.mock._scripted import (
        FunctionProvider,
        MockProvider,
        MockScriptExhausted,
        MockStreamingProvider,
        SetupError,
    )
    from allama.mock._structured import MockScriptError, Structured
    from allama.mock._test_provider import TestProvider
    from allama.mock._values import value_for_schema

__all__ = [
    "ChatResponseBuilder",
    "FunctionProvider",
    "MockProvider",
    "MockScriptError",
    "MockScriptExhausted",
    "MockStreamingProvider",
    "SetupError",
    "Structured",
    "TestProvider",
    "response_events",
    "value_for_schema",
]

_getattr, __dir__ = lazy_names(
    __name__,
    {
        "allama.mock._builder": ("ChatResponseBuilder",),
        "allama.mock._events": ("response_events",),
        "allama.mock._scripted": (
            "FunctionProvider",
            "MockProvider",
            "MockScriptExhausted",
            "MockStreamingProvider",
            "SetupError",
        ),
        "allama.mock._structured": ("MockScriptError", "Structured"),
        "allama.mock._test_provider": ("TestProvider",),
        "allama.mock._values": ("value_for_schema",),
    },
)
if not TYPE_CHECKING:
    __getattr__ = _getattr
