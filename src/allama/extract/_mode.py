"""How structured output is obtained, and how far the provider enforced the schema."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from allama.types import Warning, WarningKind


class ExtractionMode(StrEnum):
    """How structured output is obtained. Attach it with `request.with_option(mode)`.

    `AUTO` (the default) picks from the provider's capability answers; `NATIVE` uses the
    provider's JSON Schema response format; `FORCED_TOOL` forces a call to a synthetic tool
    whose arguments follow the schema.
    """

    __option_namespace__ = "allama.extraction"

    AUTO = "auto"
    NATIVE = "native"
    FORCED_TOOL = "forced_tool"


_RANK = {"not_enforced": 0, "approximate": 1, "exact": 2}


class SchemaEnforcement(StrEnum):
    """How far the provider reported constraining the output to the schema of the type.

    `EXACT`: constrained decoding ran over the schema, rewritten only in ways that change
    nothing the type accepts. `APPROXIMATE`: it ran over a widened schema, or one sent to an
    engine that does not report what it enforces. `NOT_ENFORCED`: strict mode was not
    honoured (or no call was made).
    """

    EXACT = "exact"
    APPROXIMATE = "approximate"
    NOT_ENFORCED = "not_enforced"

    def satisfies(self, floor: SchemaEnforcement) -> bool:
        """Whether this is at least `floor`.

        >>> SchemaEnforcement.EXACT.satisfies(SchemaEnforcement.APPROXIMATE)
        True
        >>> SchemaEnforcement.NOT_ENFORCED.satisfies(SchemaEnforcement.APPROXIMATE)
        False
        """
        return _RANK[self.value] >= _RANK[floor.value]

    @classmethod
    def from_degradations(cls, warnings: Iterable[Warning]) -> SchemaEnforcement:
        """Any unsupported warning means not enforced; any other, approximate; none, exact."""
        found = list(warnings)
        if any(warning.kind is WarningKind.UNSUPPORTED for warning in found):
            return cls.NOT_ENFORCED
        return cls.APPROXIMATE if found else cls.EXACT

    @property
    def adverb(self) -> str:
        return {"exact": "exactly", "approximate": "approximately"}.get(
            self.value, "without enforcement"
        )
