"""The base every vocabulary type shares: immutable, strict about its own keys, JSON round trip."""

from __future__ import annotations

from typing import Self

import pydantic.main
from pydantic import BaseModel, ConfigDict

__all__ = ["DEFER_BUILD", "Data"]

DEFER_BUILD = hasattr(pydantic.main, "_rebuild_lock")
"""Whether models build their validators on first use rather than when defined.

Building a model's validator is most of what defining it costs, and a program uses a few of
the vocabulary's models. A model built on first use is safe across threads only where
pydantic serialises those builds (its rebuild lock, in the pydantic this was measured with,
2.14); with an older pydantic, models are built when defined, as before.
"""


class Data(BaseModel):
    """Plain immutable data: changed by copying (`model_copy`), serialised as JSON.

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

    def to_json(self) -> str:
        """The JSON form; `type(self).from_json` reads it back."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> Self:
        return cls.model_validate_json(text)
