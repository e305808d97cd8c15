"""The base every vocabulary type shares: immutable, strict about its own keys, JSON round trip."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict


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
