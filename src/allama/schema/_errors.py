"""The error for a schema the toolkit cannot read, so callers can tell bad input from a bug."""

from __future__ import annotations

__all__ = ["SchemaError"]


class SchemaError(ValueError):
    """A schema that is not valid JSON Schema, or that no rewrite can read.

    Raised before anything is sent: a dangling or non-local `$ref`, a keyword of the wrong
    shape, or nesting too deep to walk safely. `pointer` names the place (`/` is the root)
    and the message repeats it in backticks.
    """

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(message)
        self.pointer = pointer or "/"
