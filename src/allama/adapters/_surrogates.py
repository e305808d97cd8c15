"""Half of a character in a provider's JSON: a lone surrogate, which JSON may escape
(`"\\ud83d"`) and no UTF-8 text holds. Every API reads it as U+FFFD and says so in the same
words, so that the paid answer can be stored (the ledger, `to_json`) and sent back."""

from __future__ import annotations

from typing import Any

import pydantic_core

from allama._printable import storable
from allama.adapters._http import wire_json
from allama.types._lone_surrogates import (
    LONE_SURROGATES,
    lone_surrogates,
    with_lone_surrogates,
)

__all__ = [
    "LONE_SURROGATES",
    "holds_lone_surrogate",
    "lone_surrogates",
    "read_storable_json",
    "storable_json",
    "with_lone_surrogates",
]


def holds_lone_surrogate(value: Any) -> bool:
    """Whether a string in JSON data (a key too) holds a lone surrogate. Walked without
    recursion: the standard library reads JSON nested deeper than a recursive walk goes."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if storable(item) != item:
                return True
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
    return False


def storable_json(value: Any) -> Any:
    """JSON data with each lone surrogate in its strings (keys too) as U+FFFD (`storable`),
    in the same order; built without recursion, as `holds_lone_surrogate` walks it."""
    pending: list[tuple[Any, Any]] = []

    def copied(item: Any) -> Any:
        if isinstance(item, str):
            return storable(item)
        if isinstance(item, list | dict):
            made: Any = [] if isinstance(item, list) else {}
            pending.append((item, made))
            return made
        return item

    root = copied(value)
    while pending:
        source, made = pending.pop()
        if isinstance(source, list):
            made.extend(copied(item) for item in source)
        else:
            made.update((storable(key), copied(item)) for key, item in source.items())
    return root


def read_storable_json(data: bytes | str) -> tuple[Any, bool]:
    """JSON as `read_json` reads it, each lone surrogate in it as U+FFFD (`storable_json`),
    and whether it held one (its answer is then told `lone_surrogates`); `ValueError` when
    it is not JSON. Only what pydantic-core refused can hold one: it reads no lone
    surrogate, and the standard library's reader, taking over, keeps each as it came."""
    try:
        return pydantic_core.from_json(data), False
    except ValueError:
        payload = wire_json(data)
    if not holds_lone_surrogate(payload):
        return payload, False
    return storable_json(payload), True
