"""Capability tables: model families matched by a glob on the model id, as data.

Every dialect keeps what its model families can do in rows of its own kind (a
`ModelFamily` for Chat Completions, a `ClaudeFamily`, a `GeminiFamily`); the lookup is the
same for all: the first row whose glob matches the lower-cased id, else the default, cached
per id. A new model is a one-line change in its dialect's table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Generic, Protocol, TypeVar

from allama.types import CapabilitySupport, ChatCapability

__all__ = ["Family", "FamilyTable"]


class Family(Protocol):
    @property
    def pattern(self) -> str: ...

    def support(self, capability: ChatCapability) -> CapabilitySupport: ...


F = TypeVar("F", bound=Family)

_CACHE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class FamilyTable(Generic[F]):
    """Rows matched in order (the first match wins, so a specific family comes before the
    broader one it would also match), and the answer for ids no row matches."""

    families: tuple[F, ...]
    default: F
    strip_prefix: str = ""
    """A resource prefix some ids carry (Gemini's `models/`), left out before matching."""
    _cache: dict[str, F] = field(default_factory=dict, compare=False, repr=False)

    def family(self, model: str) -> F:
        found = self._cache.get(model)
        if found is None:
            key = self._key(model)
            found = next(
                (row for row in self.families if fnmatchcase(key, row.pattern)),
                self.default,
            )
            if len(self._cache) < _CACHE_SIZE:
                self._cache[model] = found
        return found

    def _key(self, model: str) -> str:
        """What the globs are matched against: the id, lower-cased, without the prefix."""
        return model.lower().removeprefix(self.strip_prefix)

    def support(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        return self.family(model).support(capability)
