"""The base every vocabulary type shares: immutable, strict about its own keys, JSON round trip."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Self

import pydantic.main
from pydantic import BaseModel, ConfigDict

__all__ = ["DEFER_BUILD", "Data", "check_finite", "kinds_listed"]

DEFER_BUILD = hasattr(pydantic.main, "_rebuild_lock")
"""Whether models build their validators on first use rather than when defined.

Building a model's validator is most of what defining it costs, and a program uses a few of
the vocabulary's models. A model built on first use is safe across threads only where
pydantic serialises those builds (its rebuild lock, in the pydantic this was measured with,
2.14); with an older pydantic, models are built when defined, as before.
"""


class Data(BaseModel):
    """Plain immutable data: changed by copying, serialised as JSON.

    A type's own methods make the changed copy (`ChatRequest.with_temperature(0.2)`,
    `.user("Hi")`), checked as its constructor checks. `model_copy(update=...)` is checked
    too: pydantic's own copies the new values in unchecked, so a `stop` of `"END"` would go
    as its letters and a temperature of `"hot"` fail only when sent.

    Validation errors name the field and the problem but not the input, which may be the
    caller's or the model's text.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        hide_input_in_errors=True,
        ser_json_bytes="base64",
        val_json_bytes="base64",
        use_enum_values=False,
        defer_build=DEFER_BUILD,
    )

    def __str__(self) -> str:
        # pydantic's `str` lists every field and would bypass the reprs that withhold text.
        return repr(self)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """What pydantic's other printers show (rich's `__rich_repr__`, devtools'
        `__pretty__`): the fields, or, for a type whose own `__repr__` withholds text, that
        repr's arguments, so that no printer shows what the repr withholds."""
        if type(self).__repr__ is BaseModel.__repr__:
            yield from super().__repr_args__()
            return
        shown = repr(self)
        head = f"{type(self).__name__}("
        inner = shown[len(head) : -1] if shown.startswith(head) and shown.endswith(")") else shown
        yield None, _Shown(inner)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with `update`'s fields changed, read as the constructor reads them (a
        `ValidationError` for a value it refuses, or for a name that is no field)."""
        copied = super().model_copy(deep=deep)
        if not update:
            return copied
        fields = {name: getattr(copied, name) for name in copied.model_fields_set}
        return type(self).model_validate({**fields, **update})

    def _replaced(self, update: Mapping[str, Any]) -> Self:
        """`model_copy(update=...)` as pydantic makes it, the values taken as they are: for
        a type's own methods, and for allama's own code with values it built or has already
        validated (re-reading a long conversation at each turn added would make building it
        quadratic)."""
        return super().model_copy(update=update)

    def to_json(self) -> str:
        """The JSON form; `type(self).from_json` reads it back."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> Self:
        return cls.model_validate_json(text)


_KINDS_SHOWN = 8
"""The most kinds a repr lists (a message's role, a block's type) before it counts the rest."""


def kinds_listed(kinds: Sequence[str]) -> str:
    """The kinds of a repr's items (`system, user, assistant`), the first few and then how
    many more: a repr of a long conversation stays one short line."""
    if len(kinds) <= _KINDS_SHOWN:
        return ", ".join(kinds)
    return f"{', '.join(kinds[:_KINDS_SHOWN])}, and {len(kinds) - _KINDS_SHOWN} more"


class _Shown:
    """Text a printer shows as it is (its repr is the text, unquoted)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def check_finite(value: object, field: str) -> None:
    """Refuse NaN and infinity anywhere in the JSON data `value` of `field`, naming where
    (a JSON Pointer): JSON has no form for them, so a provider is sent `NaN` or `Infinity`,
    which it answers with a 400, and the JSON form writes them as `null`."""
    path = _non_finite(value)
    if path is not None:
        where, number = path
        kind = "NaN" if math.isnan(number) else "infinity"
        raise ValueError(
            f"`{field}` holds {kind} at `{where or '/'}`, which JSON has no form for (a "
            "provider answers 400): give a finite number there, or leave it out"
        )


def _non_finite(value: object, at: str = "") -> tuple[str, float] | None:
    """The JSON Pointer to the first NaN or infinity in `value`, and that number."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (at, value)
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        step = str(key).replace("~", "~0").replace("/", "~1")
        found = _non_finite(item, f"{at}/{step}")
        if found is not None:
            return found
    return None
