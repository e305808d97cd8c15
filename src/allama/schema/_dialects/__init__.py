"""One rewrite per provider dialect; each returns the schema to send and notes on what it lost."""

from allama.schema._dialects._anthropic import anthropic
from allama.schema._dialects._gemini import gemini_json_schema, gemini_response_schema
from allama.schema._dialects._grammar import grammar_engine
from allama.schema._dialects._openai_strict import OpenAIProfile, openai_strict
from allama.schema._dialects._passthrough import json_object_fallback, passthrough

__all__ = [
    "OpenAIProfile",
    "anthropic",
    "gemini_json_schema",
    "gemini_response_schema",
    "grammar_engine",
    "json_object_fallback",
    "openai_strict",
    "passthrough",
]
