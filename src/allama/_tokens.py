"""A request's input tokens guessed from its text, before any usage says: for a limit of
tokens per minute, which is only ever checked against such a guess."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from allama.types import ChatRequest

__all__ = ["CHARS_PER_TOKEN", "guessed_input_tokens"]

CHARS_PER_TOKEN = 4
"""About as many characters as a token of English text has (more tokens for code, and for
scripts other than Latin): the guess errs low there, never high."""


def guessed_input_tokens(request: ChatRequest) -> int:
    return sum(len(message.text() or "") for message in request.messages) // CHARS_PER_TOKEN
