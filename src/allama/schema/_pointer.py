"""JSON pointers (RFC 6901) as the toolkit writes them: `""` inside, `/` for the root in notes."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

__all__ = ["child", "display", "lookup", "parse_fragment", "quoted"]


def child(pointer: str, *tokens: str | int) -> str:
    """`pointer` extended by `tokens`, escaped."""
    for token in tokens:
        text = str(token)
        if "~" in text or "/" in text:
            text = text.replace("~", "~0").replace("/", "~1")
        pointer = f"{pointer}/{text}"
    return pointer


def display(pointer: str) -> str:
    """The pointer as notes show it: `/` for the root."""
    return pointer or "/"


def quoted(pointer: str) -> str:
    """The pointer in backticks, the form extraction rewrites into the caller's terms."""
    return f"`{display(pointer)}`"


def parse_fragment(fragment: str) -> str:
    """The pointer in a URI fragment (`#/$defs/A%20B` is `/$defs/A B`)."""
    return unquote(fragment)


def lookup(document: Any, pointer: str) -> Any:
    """The value at `pointer`; `KeyError` when there is none."""
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        raise KeyError(pointer)
    node = document
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise KeyError(pointer)
    return node
