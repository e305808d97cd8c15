"""One rewrite per provider dialect; each returns the schema to send and notes on what it lost."""

from typing import TYPE_CHECKING

from allama._lazy import lazy_names

if TYPE_CHECKING:
    from allama.schema._dialects._anthropic import anthropic
    from allama.schema._dialects._gemini import gemini_json_schema, gemini_response_schema
    from allama.schema._dialects._grammar import fireworks, grammar_engine
    from allama.schema._dialects._openai_strict import OpenAIProfile, openai_strict
    from allama.schema._dialects._passthrough import json_object_fallback, passthrough

__all__ = [
    "OpenAIProfile",
    "anthropic",
    "fireworks",
    "gemini_json_schema",
    "gemini_response_schema",
    "grammar_engine",
    "json_object_fallback",
    "openai_strict",
    "passthrough",
]

_getattr, __dir__ = lazy_names(
    __name__,
    {
        "allama.schema._dialects._anthropic": ("anthropic",),
        "allama.schema._dialects._gemini": ("gemini_json_schema", "gemini_response_schema"),
        "allama.schema._dialects._grammar": ("fireworks", "grammar_engine"),
        "allama.schema._dialects._openai_strict": ("OpenAIProfile", "openai_strict"),
        "allama.schema._dialects._passthrough": ("json_object_fallback", "passthrough"),
    },
)
if not TYPE_CHECKING:
    __getattr__ = _getattr
