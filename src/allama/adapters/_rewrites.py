"""Dialect rewrites, cached: extraction sends the same schema call after call.

A type's own schema keeps its rewrites with it (`derived`); any other schema is cached by
its text, key order included, since providers emit properties in schema order.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Hashable
from typing import Any

from allama.schema._rewrite import Rewrite, SchemaNote
from allama.schema._types import derived
from allama.schema._walk import check_json
from allama.types import WarningKind

__all__ = ["cached_rewrite", "unreported"]

_CACHE_SIZE = 256
_BY_TEXT: dict[tuple[Hashable, str], Rewrite] = {}
_LOCK = threading.Lock()


def cached_rewrite(schema: dict[str, Any], kind: Hashable, make: Callable[[], Rewrite]) -> Rewrite:
    """The rewrite `make` gives for `schema` in the dialect named by `kind`, made once.

    `make` may raise `SchemaError` for a schema it cannot read; nothing is cached then.
    """
    return derived(schema, kind, lambda: _by_text(schema, kind, make))


def _by_text(schema: dict[str, Any], kind: Hashable, make: Callable[[], Rewrite]) -> Rewrite:
    try:
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        # What no JSON holds (a `datetime` a model's `json_schema_extra` keeps): the
        # `SchemaError` naming its place, as the dialect's own reading raises it.
        check_json(schema)
        return make()  # JSON in containers `json` does not write (a mapping proxy): not cached
    key = (kind, text)
    cached = _BY_TEXT.get(key)
    if cached is None:
        cached = make()
        with _LOCK:
            if len(_BY_TEXT) >= _CACHE_SIZE:
                _BY_TEXT.pop(next(iter(_BY_TEXT)), None)
            _BY_TEXT[key] = cached
    return cached


def unreported(rewrite: Rewrite, compiler: str) -> Rewrite:
    """`rewrite` with the note that `compiler` (a server's grammar converter or backend)
    does not report which keywords it enforces: even a rewrite with no notes of its own is
    only approximate there."""
    note = SchemaNote(
        WarningKind.APPROXIMATED,
        "/",
        f"the schema at `/` is compiled by {compiler}, which does not report which keywords "
        "it enforces",
    )
    return Rewrite(rewrite.schema, (*rewrite.notes, note), rewrite.dropped)
