"""The words for half of a character (a lone surrogate) read as U+FFFD: one warning for
every API's decoder, the stream collector and the extraction, which each read it where
they meet it (`allama.adapters._surrogates` reads the JSON)."""

from __future__ import annotations

from allama.types._fields import Warning
from allama.types._names import RequestField
from allama.types._response import ChatResponse

__all__ = ["LONE_SURROGATES", "lone_surrogates", "with_lone_surrogates"]

LONE_SURROGATES = (
    "the provider sent text that holds half of a character (a lone surrogate, escaped as "
    "`\\ud83d`), which UTF-8 cannot carry: each such half was read as U+FFFD"
)
"""The warning on a response whose body escaped half of a character (`lone_surrogates`)."""


def lone_surrogates(provider: str | None) -> Warning:
    """The warning on an answer read with its lone surrogates as U+FFFD."""
    warning = Warning.approximated(RequestField.OPTIONS, LONE_SURROGATES)
    return warning if provider is None else warning.with_provider(provider)


def with_lone_surrogates(response: ChatResponse) -> ChatResponse:
    """`response` told `lone_surrogates` (once): an answer whose output escaped half of a
    character (a tool call's arguments, a text of JSON), read as U+FFFD where it was read,
    as a body holding one is told."""
    warning = lone_surrogates(response.provider)
    if warning in response.warnings:
        return response
    return response.model_copy(update={"warnings": (*response.warnings, warning)})
