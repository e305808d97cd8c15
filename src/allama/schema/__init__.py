"""The schema toolkit: a type's JSON Schema, per-dialect rewrites, and the checks around them.

Pure functions, no I/O. Each dialect rewrite returns a `Rewrite`: the schema to send and
notes on what it widened or could not keep; `apply_strict_policy` turns those into warnings
or a refusal.
"""

from typing import TYPE_CHECKING

from allama._lazy import lazy_names

if TYPE_CHECKING:
    from allama.schema._dialects import (
        OpenAIProfile,
        anthropic,
        gemini_json_schema,
        gemini_response_schema,
        grammar_engine,
        json_object_fallback,
        openai_strict,
        passthrough,
    )
    from allama.schema._errors import SchemaError
    from allama.schema._nulls import may_hold_stand_in_nulls, normalize_strict_nulls
    from allama.schema._rewrite import Rewrite, SchemaNote, apply_strict_policy
    from allama.schema._types import TypeSchema, schema_name, type_label, type_schema
    from allama.schema._undeclared import (
        UndeclaredKey,
        find_undeclared_key,
        may_ignore_undeclared_keys,
    )

__all__ = [
    "OpenAIProfile",
    "Rewrite",
    "SchemaError",
    "SchemaNote",
    "TypeSchema",
    "UndeclaredKey",
    "anthropic",
    "apply_strict_policy",
    "find_undeclared_key",
    "gemini_json_schema",
    "gemini_response_schema",
    "grammar_engine",
    "json_object_fallback",
    "may_hold_stand_in_nulls",
    "may_ignore_undeclared_keys",
    "normalize_strict_nulls",
    "openai_strict",
    "passthrough",
    "schema_name",
    "type_label",
    "type_schema",
]

_getattr, __dir__ = lazy_names(
    __name__,
    {
        "allama.schema._dialects": (
            "OpenAIProfile",
            "anthropic",
            "gemini_json_schema",
            "gemini_response_schema",
            "grammar_engine",
            "json_object_fallback",
            "openai_strict",
            "passthrough",
        ),
        "allama.schema._errors": ("SchemaError",),
        "allama.schema._nulls": ("may_hold_stand_in_nulls", "normalize_strict_nulls"),
        "allama.schema._rewrite": ("Rewrite", "SchemaNote", "apply_strict_policy"),
        "allama.schema._types": ("TypeSchema", "schema_name", "type_label", "type_schema"),
        "allama.schema._undeclared": (
            "UndeclaredKey",
            "find_undeclared_key",
            "may_ignore_undeclared_keys",
        ),
    },
)
if not TYPE_CHECKING:
    __getattr__ = _getattr
