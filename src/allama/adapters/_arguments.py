"""A tool call's arguments sent back as an object, for the dialects that take them so
(Anthropic's `tool_use.input`, Gemini's `functionCall.args`, Ollama's
`function.arguments`) rather than as the text another provider gave.

The body is written from Python values, so a number goes as a float (an integer as
written): one that is no number JSON holds (`NaN`, `Infinity`, `1e400`, which a Chat
Completions server may have written) would make the body invalid JSON, and is refused;
one whose digits a float does not keep is sent as the nearest float, with a warning.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

from allama._degradations import Degradations
from allama.errors import InvalidRequestError
from allama.types import RequestField, ToolCall

__all__ = ["call_arguments"]


class _NotFinite(Exception):
    """A number in tool call arguments that JSON does not hold."""


def _not_finite(constant: str) -> Any:
    raise _NotFinite


def call_arguments(
    call: ToolCall, *, provider: str, display: str, field: str, degradations: Degradations
) -> dict[str, Any]:
    """`call`'s arguments as the object `field` of `display`'s dialect takes, or an
    `InvalidRequestError` naming the call."""
    if not call.arguments.strip():
        # No arguments at all: how other providers (OpenAI's `""`) write a call of a tool
        # that takes none, and how allama reads a call streamed with none.
        return {}
    rounded = False

    def number(text: str) -> float:
        nonlocal rounded
        value = float(text)
        if not math.isfinite(value):
            raise _NotFinite
        rounded = rounded or Decimal(repr(value)) != Decimal(text)
        return value

    try:
        value = json.loads(call.arguments, parse_float=number, parse_constant=_not_finite)
    except _NotFinite:
        raise _invalid(
            f"the arguments of tool call `{call.id}` hold a number that is not finite (NaN, "
            f"an infinity, or too large for a float), which {display} cannot take in JSON",
            provider,
        ) from None
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise _invalid(
            f"the arguments of tool call `{call.id}` are not a JSON object, which {display} "
            f"needs for `{field}`",
            provider,
        )
    if rounded:
        degradations.approximate(
            RequestField.MESSAGES,
            f"the arguments of tool call `{call.id}` hold a number with more digits than a "
            "float keeps; it was sent as the nearest float",
        )
    return value


def _invalid(why: str, provider: str) -> InvalidRequestError:
    return InvalidRequestError(why).mark_authored().with_provider(provider)
