"""Endpoints that take a schema without saying what they enforce, and the `json_object` fallback."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from allama.schema._rewrite import Rewrite, SchemaNote
from allama.schema._walk import copy_json, preflight
from allama.types import WarningKind

__all__ = ["json_object_fallback", "passthrough"]


def passthrough(schema: Mapping[str, Any]) -> Rewrite:
    """`schema` unchanged, noted as sent unchecked: the endpoint does not say what it enforces.

    Raises `SchemaError` for a schema that is not valid JSON Schema.
    """
    preflight(schema)
    return Rewrite(
        schema=copy_json(schema),
        notes=(
            SchemaNote(
                WarningKind.APPROXIMATED,
                "/",
                "the schema at `/` was sent unchecked: the endpoint does not report "
                "which keywords it enforces",
            ),
        ),
    )


def json_object_fallback(schema: Mapping[str, Any]) -> Rewrite:
    """`schema` unchanged, noted as not enforced: `json_object` only asks for some JSON object.

    Raises `SchemaError` for a schema that is not valid JSON Schema.
    """
    preflight(schema)
    return Rewrite(
        schema=copy_json(schema),
        notes=(
            SchemaNote(
                WarningKind.UNSUPPORTED,
                "/",
                "the schema at `/` is not enforced: `json_object` mode only constrains the "
                "output to a JSON object",
            ),
        ),
    )
